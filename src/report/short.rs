//! `--format short`: one line per finding, `path:line:col: level[rule]: message`.

use std::io::{self, Write};

use super::Report;

pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    for f in &report.outcome.findings {
        let d = &f.diag;
        writeln!(
            out,
            "{}:{}:{}: {}[{}]: {}",
            report.file(f, &d.primary),
            d.primary.start.line,
            d.primary.start.column,
            f.level.as_str(),
            d.rule,
            d.message
        )?;
    }
    super::write_summary(report, out)
}
