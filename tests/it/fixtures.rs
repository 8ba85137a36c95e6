//! The fixture harness: every `fixtures/<rule>/` case analysed, findings compared exactly with the markers (placeholder).
