//! Baselines for adopting staleguard in an old codebase: findings keyed by rule + file +
//! function + a hash of the hazard's own text, so they survive unrelated edits above them.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use staleguard_rules::Diagnostic;

use crate::analyze::Finding;

/// The baseline file format (JSON), version 1.
#[derive(Debug, Serialize, Deserialize)]
pub struct BaselineFile {
    pub version: u32,
    pub findings: Vec<Entry>,
}

/// One recorded finding.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub rule: String,
    pub file: String,
    #[serde(default)]
    pub function: Option<String>,
    /// The finding's fingerprint (see [`fingerprint`]).
    pub fingerprint: String,
    /// The message when recorded, for people reading the file; not part of the key.
    #[serde(default)]
    pub message: String,
}

/// A stable 64-bit FNV-1a hash, hex-encoded, of rule, file, function and the primary span's
/// whitespace-normalized text (the whole line's text when the span is empty).
pub fn fingerprint(diag: &Diagnostic, text: Option<&str>) -> String {
    let snippet = text.map(|t| snippet(diag, t)).unwrap_or_default();
    fnv(&[
        diag.rule,
        diag.primary.file.as_str(),
        diag.function.as_deref().unwrap_or(""),
        snippet.as_str(),
    ])
}

/// A stable 64-bit FNV-1a hash of the parts (each ended by a 0 byte), as 16 hex digits.
pub fn fnv(parts: &[&str]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain(std::iter::once(0)) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

fn snippet(diag: &Diagnostic, text: &str) -> String {
    let (start, end) = (diag.primary.byte_start, diag.primary.byte_end);
    let raw = if start < end
        && end <= text.len()
        && text.is_char_boundary(start)
        && text.is_char_boundary(end)
    {
        &text[start..end]
    } else {
        let line = diag.primary.start.line.max(1) as usize - 1;
        text.lines().nth(line).unwrap_or("")
    };
    raw.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A loaded baseline: how many times each key was recorded.
#[derive(Debug, Default)]
pub struct Baseline {
    counts: HashMap<(String, String, Option<String>, String), usize>,
}

impl Baseline {
    pub fn load(path: &Path) -> Result<Baseline, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read baseline {}: {e}", path.display()))?;
        let file: BaselineFile = serde_json::from_str(&text)
            .map_err(|e| format!("invalid baseline {}: {e}", path.display()))?;
        if file.version != 1 {
            return Err(format!(
                "baseline {} has version {}, this staleguard reads version 1",
                path.display(),
                file.version
            ));
        }
        let mut counts = HashMap::new();
        for e in file.findings {
            *counts
                .entry((e.rule, e.file, e.function, e.fingerprint))
                .or_insert(0) += 1;
        }
        Ok(Baseline { counts })
    }

    /// Whether the finding is recorded; each recorded entry hides one finding.
    pub fn take(&mut self, finding: &Finding) -> bool {
        let key = (
            finding.diag.rule.to_string(),
            finding.diag.primary.file.clone(),
            finding.diag.function.clone(),
            finding.fingerprint.clone(),
        );
        match self.counts.get_mut(&key) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }
}

/// Writes the findings as a baseline file (files that did not parse are never recorded).
pub fn write(path: &Path, findings: &[Finding]) -> Result<(), String> {
    let file = BaselineFile {
        version: 1,
        findings: findings
            .iter()
            .filter(|f| !f.is_bad_input())
            .map(|f| Entry {
                rule: f.diag.rule.to_string(),
                file: f.diag.primary.file.clone(),
                function: f.diag.function.clone(),
                fingerprint: f.fingerprint.clone(),
                message: f.diag.message.clone(),
            })
            .collect(),
    };
    let mut text = serde_json::to_string_pretty(&file).map_err(|e| e.to_string())?;
    text.push('\n');
    std::fs::write(path, text).map_err(|e| format!("cannot write baseline {}: {e}", path.display()))
}
