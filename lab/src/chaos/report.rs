//! The report of a matrix run (`docs/design/chaos.md`): `report.json` (every run), `report.md` (a
//! table per scenario and a short generated reading) and one SVG timeline per run the caller picks.
//! The SVG is built by hand: one lane per node coloured by role, fault windows shaded, process
//! faults marked, and a strip on top that turns red wherever two or more nodes claim at once.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::Path;

use serde::Serialize;

use crate::chaos::check::{node_segments, split_brain, LogState, ProcKind, RunLog, RunResult};
use electd_client::{Role, View};

/// Reads `dir/report.json`, judges C5 again for every run from its stored
/// `runs/<scenario>-<mode>-<layer>-<seed>/runlog.json`, and rewrites `report.json` and
/// `report.md` (keeping the timelines already in `dir`). Returns how many runs were judged.
pub fn rejudge_c5(dir: &Path) -> io::Result<usize> {
    let text = fs::read_to_string(dir.join("report.json"))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(io::Error::other)?;
    let mut runs: Vec<RunResult> =
        serde_json::from_value(v["runs"].clone()).map_err(io::Error::other)?;
    let mut judged = 0;
    for r in &mut runs {
        let stored = dir
            .join("runs")
            .join(format!("{}-{}-{}-{}", r.scenario, r.mode, r.layer, r.seed));
        let Ok(bytes) = fs::read(stored.join("runlog.json")) else {
            continue;
        };
        let log: RunLog = serde_json::from_slice(&bytes).map_err(io::Error::other)?;
        let c5 = crate::chaos::check::disruption(&log);
        r.minority_terms_gained = c5.minority_terms_gained;
        r.heal_leader_changes = c5.heal_leader_changes;
        judged += 1;
    }
    // The timelines already written: `![title](file.svg)` lines of the old report.md.
    let old_md = fs::read_to_string(dir.join("report.md")).unwrap_or_default();
    let pictures: Vec<(String, String)> = old_md
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("![")?;
            let (title, rest) = rest.split_once("](")?;
            let file = rest.strip_suffix(')')?;
            Some((file.to_string(), title.to_string()))
        })
        .collect();
    fs::write(dir.join("report.json"), report_json(&runs)?)?;
    fs::write(dir.join("report.md"), report_md(&runs, &pictures))?;
    Ok(judged)
}

/// Writes `report.json`, `report.md` and `<stem>.svg` for every timeline into `dir` (created if
/// needed). A stem must be a plain file name (no path separator, not empty).
pub fn write_report(
    dir: &Path,
    runs: &[RunResult],
    timelines: &[(String, RunLog, String)],
) -> io::Result<()> {
    for (stem, _, _) in timelines {
        if stem.is_empty() || stem.contains(['/', '\\']) || stem == "." || stem == ".." {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("timeline file stem {stem:?} is not a plain file name"),
            ));
        }
    }
    fs::create_dir_all(dir)?;
    fs::write(dir.join("report.json"), report_json(runs)?)?;
    let pictures: Vec<(String, String)> = timelines
        .iter()
        .map(|(stem, _, title)| (format!("{stem}.svg"), title.clone()))
        .collect();
    fs::write(dir.join("report.md"), report_md(runs, &pictures))?;
    for (stem, log, title) in timelines {
        fs::write(dir.join(format!("{stem}.svg")), timeline_svg(log, title))?;
    }
    Ok(())
}

/// `{"runs": [...]}`, pretty-printed.
pub fn report_json(runs: &[RunResult]) -> io::Result<String> {
    #[derive(Serialize)]
    struct Report<'a> {
        runs: &'a [RunResult],
    }
    let mut text = serde_json::to_string_pretty(&Report { runs })?;
    text.push('\n');
    Ok(text)
}

/// The Markdown report: per scenario a table with one row per mode and layer (seeds folded
/// together), a reading per mode, and the failed and skipped runs; then the timelines, given as
/// `(file name, title)`.
pub fn report_md(runs: &[RunResult], timelines: &[(String, String)]) -> String {
    let mut out = String::from("# Chaos report\n\n");
    let skipped = runs.iter().filter(|r| r.skipped.is_some()).count();
    let passed = runs.iter().filter(|r| r.passed).count();
    let _ = writeln!(
        out,
        "{} runs: {} passed, {} failed, {} skipped.\n",
        runs.len(),
        passed,
        runs.len() - passed - skipped,
        skipped
    );
    out.push_str(
        "Times are in ms, worst seed shown (as are max leaders); leader changes and messages \
         are means per run. *never*: in at least one seed no leader was agreed (failover) or the \
         cluster did not converge after heal. Quorum mode passes with no split brain at all, \
         election safety and convergence within the bound; bully and ring pass on convergence \
         alone (their split brain is expected under partitions and reported).\n",
    );

    out.push_str(&cost_section(runs));
    out.push_str(&disruption_section(runs));

    for scenario in first_seen(runs.iter().map(|r| r.scenario.as_str())) {
        let in_scenario: Vec<&RunResult> = runs.iter().filter(|r| r.scenario == scenario).collect();
        let _ = writeln!(out, "\n## {scenario}\n");
        out.push_str(
            "| mode | layer | seeds | split brain ms | max leaders | leaderless ms | \
             majority-leaderless ms | failover ms | converge ms | leader changes | messages | \
             safety | passed |\n",
        );
        out.push_str("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n");
        let by_mode: Vec<(&str, Vec<&RunResult>)> = modes_in_order(&in_scenario)
            .into_iter()
            .map(|mode| {
                let of_mode = in_scenario
                    .iter()
                    .copied()
                    .filter(|r| r.mode == mode)
                    .collect();
                (mode, of_mode)
            })
            .collect();
        for (mode, of_mode) in &by_mode {
            let mode = *mode;
            for layer in first_seen(of_mode.iter().map(|r| r.layer.as_str())) {
                let row: Vec<&RunResult> = of_mode
                    .iter()
                    .copied()
                    .filter(|r| r.layer == layer)
                    .collect();
                out.push_str(&table_row(mode, layer, &row));
            }
        }

        out.push_str("\nReading:\n\n");
        for (mode, of_mode) in &by_mode {
            let _ = writeln!(out, "- {}", reading(mode, of_mode));
        }

        let troubled: Vec<&RunResult> = in_scenario
            .iter()
            .copied()
            .filter(|r| !r.passed || r.skipped.is_some())
            .collect();
        if !troubled.is_empty() {
            out.push_str("\nFailed or skipped runs:\n\n");
            for r in troubled {
                let why = match &r.skipped {
                    Some(reason) => format!("skipped: {reason}"),
                    None if r.notes.is_empty() => "failed".to_string(),
                    None => r.notes.join("; "),
                };
                let _ = writeln!(out, "- {} / {} / seed {}: {}", r.mode, r.layer, r.seed, why);
            }
        }
    }

    if !timelines.is_empty() {
        out.push_str("\n## Timelines\n\n");
        out.push_str(
            "Lanes: green leader, amber candidate, pale blue follower, dark grey down, white \
             unknown, hatched paused. Red shading: network faults. Top strip: red where two or \
             more nodes claim at once.\n\n",
        );
        for (file, title) in timelines {
            let _ = writeln!(out, "### {title}\n\n![{title}]({file})\n");
        }
    }
    out
}

/// Per mode, the mean peer messages per second of steady state and per election, by type.
fn cost_section(runs: &[RunResult]) -> String {
    let done: Vec<&RunResult> = runs.iter().filter(|r| r.skipped.is_none()).collect();
    if done.iter().all(|r| r.steady_msgs_per_s.is_empty()) {
        return String::new();
    }
    let mut out = String::from(
        "\n## Cost\n\nPeer messages by type, means over the runs: per second in a fault-free \
         second with an agreed leader, and per election (messages after the first fault beyond \
         the steady rate, divided by the leader changes; runs without a leader change left out). \
         Killed processes lose their counters, so scenarios with kills undercount.\n\n\
         | mode | steady msgs/s | msgs per election | runs with elections |\n|---|---|---|---:|\n",
    );
    let fmt = |m: &BTreeMap<String, f64>| {
        let total: f64 = m.values().sum();
        let parts: Vec<String> = m
            .iter()
            .filter(|(_, v)| **v > 0.0)
            .map(|(k, v)| format!("{k} {v:.1}"))
            .collect();
        if parts.is_empty() {
            "0".to_string()
        } else {
            format!("{total:.1} ({})", parts.join(", "))
        }
    };
    for mode in modes_in_order(&done) {
        let of_mode: Vec<&RunResult> = done.iter().copied().filter(|r| r.mode == mode).collect();
        let steady = mean_map(of_mode.iter().map(|r| &r.steady_msgs_per_s));
        let elections: Vec<&BTreeMap<String, f64>> = of_mode
            .iter()
            .filter_map(|r| r.msgs_per_election.as_ref())
            .collect();
        let per = if elections.is_empty() {
            "–".to_string()
        } else {
            fmt(&mean_map(elections.iter().copied()))
        };
        let _ = writeln!(
            out,
            "| {mode} | {} | {per} | {} |",
            fmt(&steady),
            elections.len()
        );
    }
    out
}

/// C5 per mode and scenario: terms gained by cut-off nodes while cut off, and leaders of a
/// higher term elected after a heal than the one claiming at the heal.
fn disruption_section(runs: &[RunResult]) -> String {
    let done: Vec<&RunResult> = runs.iter().filter(|r| r.skipped.is_none()).collect();
    if done.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\n## Disruption (C5)\n\nPer mode, summed over the runs: terms gained by nodes cut off \
         from every majority while they were cut off, and leaders of a higher term elected after \
         a fault window ended than the one claiming when it ended (a healed node deposing a \
         healthy leader). Scenarios with no cut-off node or no claimant at a heal add nothing.\n\n\
         | mode | terms gained by cut-off nodes | leaders deposed by a heal | runs |\n|---|---:|---:|---:|\n",
    );
    for mode in modes_in_order(&done) {
        let of_mode: Vec<&&RunResult> = done.iter().filter(|r| r.mode == mode).collect();
        let terms: u64 = of_mode.iter().map(|r| r.minority_terms_gained).sum();
        let deposed: u64 = of_mode.iter().filter_map(|r| r.heal_leader_changes).sum();
        let _ = writeln!(out, "| {mode} | {terms} | {deposed} | {} |", of_mode.len());
    }
    out
}

/// The per-key mean of maps (a key missing from a map counts as 0 there).
fn mean_map<'a>(maps: impl Iterator<Item = &'a BTreeMap<String, f64>>) -> BTreeMap<String, f64> {
    let maps: Vec<&BTreeMap<String, f64>> = maps.collect();
    let mut sum: BTreeMap<String, f64> = BTreeMap::new();
    for m in &maps {
        for (k, v) in *m {
            *sum.entry(k.clone()).or_default() += v;
        }
    }
    let n = maps.len().max(1) as f64;
    sum.into_iter().map(|(k, v)| (k, v / n)).collect()
}

/// Distinct values in order of first appearance.
fn first_seen<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen: Vec<&str> = Vec::new();
    for item in items {
        if !seen.contains(&item) {
            seen.push(item);
        }
    }
    seen
}

/// quorum, bully, ring first, then any other mode in order of first appearance.
fn modes_in_order<'a>(runs: &[&'a RunResult]) -> Vec<&'a str> {
    let mut modes = first_seen(runs.iter().map(|r| r.mode.as_str()));
    let rank = |m: &str| match m {
        "quorum" => 0,
        "bully" => 1,
        "ring" => 2,
        _ => 3,
    };
    modes.sort_by_key(|m| rank(m)); // stable: unknown modes keep their order
    modes
}

fn table_row(mode: &str, layer: &str, runs: &[&RunResult]) -> String {
    let seeds = if runs.len() <= 4 {
        runs.iter()
            .map(|r| r.seed.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    } else {
        format!("{} seeds", runs.len())
    };
    let done: Vec<&RunResult> = runs
        .iter()
        .copied()
        .filter(|r| r.skipped.is_none())
        .collect();
    let skipped = runs.len() - done.len();
    if done.is_empty() {
        return format!(
            "| {mode} | {layer} | {seeds} | – | – | – | – | – | – | – | – | – | skipped |\n"
        );
    }
    let max_of = |f: &dyn Fn(&RunResult) -> f64| done.iter().map(|r| f(r)).fold(0.0, f64::max);
    let split = max_of(&|r| r.split_brain_ms);
    let max_leaders = done.iter().map(|r| r.max_leaders).max().unwrap_or(0);
    let leaderless = max_of(&|r| r.leaderless_ms);
    let majority = worst_optional(&done, |r| r.majority_leaderless_ms, "n/a");
    let failover = worst_optional(&done, |r| r.failover_ms, "never");
    let converge = worst_optional(&done, |r| r.converge_ms, "never");
    let changes = mean(done.iter().map(|r| r.leader_changes as f64));
    let messages = if done.iter().all(|r| r.messages.is_empty()) {
        "–".to_string()
    } else {
        mean(done.iter().map(|r| r.messages_total() as f64))
    };
    let safety = if done.iter().any(|r| r.election_safety == Some(false)) {
        "**violated**"
    } else if done.iter().any(|r| r.election_safety == Some(true)) {
        "ok"
    } else {
        "n/a"
    };
    let n_passed = done.iter().filter(|r| r.passed).count();
    let mut passed = if n_passed == done.len() {
        format!("{n_passed}/{}", done.len())
    } else {
        format!("**{n_passed}/{}**", done.len())
    };
    if skipped > 0 {
        let _ = write!(passed, " ({skipped} skipped)");
    }
    let split = if split > 0.0 {
        format!("**{split:.1}**")
    } else {
        format!("{split:.1}")
    };
    format!(
        "| {mode} | {layer} | {seeds} | {split} | {max_leaders} | {leaderless:.1} | {majority} | \
         {failover} | {converge} | {changes} | {messages} | {safety} | {passed} |\n"
    )
}

/// The worst (largest) value, `never_word` if any run has none (with the count when some have one),
/// or `n/a` when no run has one and `never_word` is `n/a`.
fn worst_optional(
    runs: &[&RunResult],
    f: impl Fn(&RunResult) -> Option<f64>,
    never_word: &str,
) -> String {
    let values: Vec<f64> = runs.iter().filter_map(|r| f(r)).collect();
    let missing = runs.len() - values.len();
    if values.is_empty() {
        return never_word.to_string();
    }
    if missing > 0 && never_word != "n/a" {
        return format!("{never_word} ({missing}/{})", runs.len());
    }
    format!("{:.1}", values.iter().copied().fold(0.0, f64::max))
}

fn mean(values: impl Iterator<Item = f64>) -> String {
    let v: Vec<f64> = values.collect();
    if v.is_empty() {
        return "–".to_string();
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    if m.fract() == 0.0 {
        format!("{m:.0}")
    } else {
        format!("{m:.1}")
    }
}

/// "850 ms", "3.2 s".
fn human_ms(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else if ms > 0.0 && ms < 10.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.0} ms")
    }
}

/// One generated sentence about one mode in one scenario, over its layers and seeds.
fn reading(mode: &str, runs: &[&RunResult]) -> String {
    let done: Vec<&RunResult> = runs
        .iter()
        .copied()
        .filter(|r| r.skipped.is_none())
        .collect();
    if done.is_empty() {
        return format!("**{mode}**: not run ({} skipped).", runs.len());
    }
    let n = done.len();
    let mut parts: Vec<String> = Vec::new();
    let worst = |f: &dyn Fn(&RunResult) -> f64| done.iter().map(|r| f(r)).fold(0.0, f64::max);

    let split = worst(&|r| r.split_brain_ms);
    let max_leaders = done.iter().map(|r| r.max_leaders).max().unwrap_or(0);
    if split > 0.0 {
        let mut s = format!(
            "{max_leaders} leaders at once, split brain up to {}",
            human_ms(split)
        );
        if mode == "quorum" || done.iter().any(|r| r.election_safety.is_some()) {
            s.push_str(" (a safety failure)");
        }
        parts.push(s);
    } else if max_leaders == 0 {
        parts.push("no leader at all".to_string());
    } else {
        parts.push("0 ms split brain".to_string());
    }
    if done.iter().any(|r| r.election_safety == Some(false)) {
        parts.push("two leaders in one term (election safety violated)".to_string());
    }
    let leaderless = worst(&|r| r.leaderless_ms);
    if leaderless > 0.0 {
        parts.push(format!("leaderless up to {}", human_ms(leaderless)));
    } else {
        parts.push("never leaderless".to_string());
    }
    let majority: Vec<f64> = done
        .iter()
        .filter_map(|r| r.majority_leaderless_ms)
        .collect();
    if !majority.is_empty() {
        parts.push(format!(
            "majority side without a leader up to {}",
            human_ms(majority.iter().copied().fold(0.0, f64::max))
        ));
    }
    let failovers: Vec<f64> = done.iter().filter_map(|r| r.failover_ms).collect();
    if failovers.len() == n {
        parts.push(format!(
            "failover in {}",
            human_ms(failovers.iter().copied().fold(0.0, f64::max))
        ));
    } else if !failovers.is_empty() {
        parts.push(format!(
            "no agreed leader after the fault in {} of {n} runs",
            n - failovers.len()
        ));
    } else {
        parts.push(
            "no failover measured (no agreed leader after the fault, or no fault)".to_string(),
        );
    }
    let converged: Vec<f64> = done.iter().filter_map(|r| r.converge_ms).collect();
    if converged.len() == n {
        parts.push(format!(
            "converged {} after heal",
            human_ms(converged.iter().copied().fold(0.0, f64::max))
        ));
    } else {
        parts.push(format!(
            "did not converge in {} of {n} runs",
            n - converged.len()
        ));
    }
    let changes = done.iter().map(|r| r.leader_changes).max().unwrap_or(0);
    parts.push(format!(
        "up to {changes} leader change{}",
        if changes == 1 { "" } else { "s" }
    ));
    let passed = done.iter().filter(|r| r.passed).count();
    format!("**{mode}**: {}; {passed}/{n} passed.", parts.join("; "))
}

// ---------------------------------------------------------------- SVG timeline

const WIDTH: f64 = 1000.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 20.0;
const LANE_H: f64 = 24.0;
const LANE_GAP: f64 = 10.0;
const STRIP_Y: f64 = 30.0;
const STRIP_H: f64 = 10.0;
const LABEL_ROW_H: f64 = 12.0;
const MAX_LABEL_ROWS: usize = 3;

const C_LEADER: &str = "#2e9d44";
const C_CANDIDATE: &str = "#f2a531";
const C_FOLLOWER: &str = "#cfe0f1";
const C_DOWN: &str = "#4a4a4a";
const C_FAULT: &str = "#e53935";
const C_SPLIT: &str = "#d32f2f";

/// One run as an SVG picture (about 1000 px wide): see the module docs.
pub fn timeline_svg(log: &RunLog, title: &str) -> String {
    let start = log.start_ns;
    let end = log.end_ns.max(start + 1);
    let span = (end - start) as f64;
    let plot_w = WIDTH - LEFT - RIGHT;
    let x = |t: u64| LEFT + (t.clamp(start, end) - start) as f64 / span * plot_w;

    let lanes = node_segments(log);
    let split = split_brain(log);

    // Fault labels: each in the first row where it does not run into the previous one.
    let mut faults: Vec<_> = log
        .faults
        .iter()
        .filter(|w| w.end_ns > start && w.start_ns < end)
        .collect();
    faults.sort_by_key(|w| w.start_ns);
    let mut row_end = [f64::MIN; MAX_LABEL_ROWS];
    let mut labels: Vec<(usize, f64)> = Vec::new(); // (row, x) per fault, row == MAX: none
    for w in &faults {
        let width = w.label.chars().count() as f64 * 5.6 + 8.0;
        let lx = x(w.start_ns).min(WIDTH - RIGHT - width) + 3.0;
        match row_end.iter().position(|&e| e <= lx) {
            Some(row) => {
                row_end[row] = lx + width;
                labels.push((row, lx));
            }
            None => labels.push((MAX_LABEL_ROWS, lx)),
        }
    }
    let label_rows = labels
        .iter()
        .filter(|l| l.0 < MAX_LABEL_ROWS)
        .map(|l| l.0 + 1)
        .max()
        .unwrap_or(0);
    let rows_top = STRIP_Y + STRIP_H + 6.0;
    let lanes_top = rows_top + label_rows as f64 * LABEL_ROW_H + 6.0;
    let lane_y = |i: usize| lanes_top + i as f64 * (LANE_H + LANE_GAP);
    let lanes_bottom = lane_y(lanes.len()) - LANE_GAP;
    let axis_y = lanes_bottom + 8.0;
    let legend_y = axis_y + 60.0;
    let height = legend_y + 40.0;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">"#
    );
    let _ = writeln!(s, "<title>{}</title>", esc(title));
    s.push_str(concat!(
        r##"<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">"##,
        r##"<rect width="6" height="6" fill="#ffffff" fill-opacity="0.25"/>"##,
        r##"<line x1="0" y1="0" x2="0" y2="6" stroke="#000000" stroke-opacity="0.45" stroke-width="2.5"/></pattern></defs>"##,
        "\n"
    ));
    let _ = writeln!(
        s,
        r##"<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        s,
        r##"<text x="{LEFT}" y="20" font-size="14" font-weight="bold" fill="#222222">{}</text>"##,
        esc(title)
    );

    // Grid and ticks.
    let span_s = span / 1e9;
    let step = nice_step(span_s / 10.0);
    let decimals = if step >= 1.0 {
        0
    } else if step >= 0.1 {
        1
    } else {
        2
    };
    let mut ticks = Vec::new();
    let mut k = 0u64;
    loop {
        let ts = k as f64 * step;
        if ts > span_s + step * 1e-6 {
            break;
        }
        ticks.push(ts);
        k += 1;
    }
    for &ts in &ticks {
        let tx = LEFT + ts / span_s * plot_w;
        let _ = writeln!(
            s,
            r##"<line x1="{tx:.1}" y1="{STRIP_Y}" x2="{tx:.1}" y2="{axis_y:.1}" stroke="#e6e6e6" stroke-width="1"/>"##
        );
    }

    // Lanes.
    for (i, (node, segs)) in lanes.iter().enumerate() {
        let y = lane_y(i);
        let _ = writeln!(s, r#"<g class="lane" id="lane-n{node}">"#);
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" font-size="12" font-weight="bold" text-anchor="end" fill="#222222">n{node}</text>"##,
            LEFT - 8.0,
            y + LANE_H / 2.0 + 4.0
        );
        let _ = writeln!(
            s,
            r##"<rect x="{LEFT}" y="{y:.1}" width="{plot_w}" height="{LANE_H}" fill="none" stroke="#bbbbbb" stroke-width="1"/>"##
        );
        for seg in segs {
            let x1 = x(seg.from_ns);
            let w = (x(seg.to_ns) - x1).max(0.0);
            let tip = format!(
                "n{node} {} {:.3}–{:.3} s{}",
                state_text(&seg.state),
                (seg.from_ns - start) as f64 / 1e9,
                (seg.to_ns - start) as f64 / 1e9,
                if seg.paused { " (paused)" } else { "" }
            );
            if let Some(fill) = state_fill(&seg.state) {
                let _ = writeln!(
                    s,
                    r#"<rect x="{x1:.2}" y="{y:.1}" width="{w:.2}" height="{LANE_H}" fill="{fill}"><title>{}</title></rect>"#,
                    esc(&tip)
                );
            } else {
                let _ = writeln!(
                    s,
                    r#"<rect x="{x1:.2}" y="{y:.1}" width="{w:.2}" height="{LANE_H}" fill="none" pointer-events="all"><title>{}</title></rect>"#,
                    esc(&tip)
                );
            }
            if seg.paused {
                let _ = writeln!(
                    s,
                    r#"<rect x="{x1:.2}" y="{y:.1}" width="{w:.2}" height="{LANE_H}" fill="url(#hatch)"/>"#
                );
            }
            if let Some((text, color, min_w)) = segment_text(&seg.state) {
                if w >= min_w {
                    let _ = writeln!(
                        s,
                        r#"<text x="{:.1}" y="{:.1}" font-size="9" fill="{color}">{}</text>"#,
                        x1 + 3.0,
                        y + LANE_H / 2.0 + 3.0,
                        esc(&text)
                    );
                }
            }
        }
        s.push_str("</g>\n");
    }

    // Fault windows over the lanes.
    for (w, &(row, lx)) in faults.iter().zip(&labels) {
        let x1 = x(w.start_ns);
        let x2 = x(w.end_ns);
        let groups = w
            .groups
            .iter()
            .map(|g| {
                g.iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect::<Vec<_>>()
            .join(" | ");
        let tip = format!(
            "{} [{}] {:.3}–{:.3} s",
            w.label,
            groups,
            (w.start_ns.max(start) - start) as f64 / 1e9,
            (w.end_ns.min(end) - start) as f64 / 1e9
        );
        let _ = writeln!(
            s,
            r#"<g class="fault"><title>{}</title><rect x="{x1:.2}" y="{rows_top:.1}" width="{:.2}" height="{:.1}" fill="{C_FAULT}" fill-opacity="0.13"/>"#,
            esc(&tip),
            (x2 - x1).max(1.0),
            lanes_bottom - rows_top
        );
        for ex in [x1, x2] {
            let _ = writeln!(
                s,
                r#"<line x1="{ex:.2}" y1="{rows_top:.1}" x2="{ex:.2}" y2="{lanes_bottom:.1}" stroke="{C_FAULT}" stroke-opacity="0.7" stroke-width="1" stroke-dasharray="3,2"/>"#
            );
        }
        if row < MAX_LABEL_ROWS {
            let _ = writeln!(
                s,
                r##"<text x="{lx:.1}" y="{:.1}" font-size="10" fill="#b71c1c">{}</text>"##,
                rows_top + (row + 1) as f64 * LABEL_ROW_H - 3.0,
                esc(&w.label)
            );
        }
        s.push_str("</g>\n");
    }

    // Split-brain strip.
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end" fill="#555555">split</text>"##,
        LEFT - 8.0,
        STRIP_Y + STRIP_H - 1.0
    );
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{STRIP_Y}" width="{plot_w}" height="{STRIP_H}" fill="#f1f1f1" stroke="#cccccc" stroke-width="0.5"/>"##
    );
    for sp in &split.spans {
        let x1 = x(sp.from_ns);
        let w = (x(sp.to_ns) - x1).max(1.5);
        let ids = sp
            .leaders
            .iter()
            .map(|n| format!("n{n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            s,
            r#"<rect class="split" x="{x1:.2}" y="{STRIP_Y}" width="{w:.2}" height="{STRIP_H}" fill="{C_SPLIT}"><title>{} leaders: {ids} for {:.1} ms</title></rect>"#,
            sp.leaders.len(),
            (sp.to_ns - sp.from_ns) as f64 / 1e6
        );
        if w >= 14.0 {
            let _ = writeln!(
                s,
                r##"<text x="{:.1}" y="{:.1}" font-size="8" fill="#ffffff">{}</text>"##,
                x1 + 2.0,
                STRIP_Y + STRIP_H - 2.0,
                sp.leaders.len()
            );
        }
    }

    // Process markers, on the top edge of their lane.
    let index: BTreeMap<u64, usize> = lanes
        .iter()
        .enumerate()
        .map(|(i, (node, _))| (*node, i))
        .collect();
    for p in &log.procs {
        let (Some(&i), true) = (index.get(&p.node), p.t_ns >= start && p.t_ns <= end) else {
            continue;
        };
        let tip = format!(
            "{} n{} at {:.3} s",
            proc_name(p.kind),
            p.node,
            (p.t_ns - start) as f64 / 1e9
        );
        let _ = writeln!(
            s,
            "<g class=\"proc\"><title>{}</title>{}</g>",
            esc(&tip),
            marker(p.kind, x(p.t_ns), lane_y(i))
        );
    }

    // Axis.
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" y1="{axis_y:.1}" x2="{:.1}" y2="{axis_y:.1}" stroke="#444444" stroke-width="1"/>"##,
        WIDTH - RIGHT
    );
    for &ts in &ticks {
        let tx = LEFT + ts / span_s * plot_w;
        let _ = writeln!(
            s,
            r##"<line x1="{tx:.1}" y1="{axis_y:.1}" x2="{tx:.1}" y2="{:.1}" stroke="#444444" stroke-width="1"/><text x="{tx:.1}" y="{:.1}" font-size="10" text-anchor="middle" fill="#333333">{ts:.decimals$}</text>"##,
            axis_y + 5.0,
            axis_y + 17.0
        );
    }
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end" fill="#555555">t (s)</text>"##,
        LEFT - 8.0,
        axis_y + 17.0
    );

    // Fault and heal instants.
    for (t, name) in [(log.fault_ns, "fault"), (log.heal_ns, "heal")] {
        let Some(t) = t.filter(|&t| t >= start && t <= end) else {
            continue;
        };
        let tx = x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{tx:.2}" y1="{STRIP_Y}" x2="{tx:.2}" y2="{:.1}" stroke="#222222" stroke-width="1.2" stroke-dasharray="5,3"/><path d="M {tx:.1} {:.1} l -4 6 l 8 0 z" fill="#222222"/><text x="{tx:.1}" y="{:.1}" font-size="10" font-weight="bold" text-anchor="middle" fill="#222222">{name}</text>"##,
            axis_y,
            axis_y + 24.0,
            axis_y + 40.0
        );
    }

    // Legend.
    let swatches: [(&str, &str); 5] = [
        ("leader", C_LEADER),
        ("candidate", C_CANDIDATE),
        ("follower", C_FOLLOWER),
        ("down", C_DOWN),
        ("unknown", "#ffffff"),
    ];
    let mut lx = LEFT;
    let row1 = legend_y;
    for (name, fill) in swatches {
        let _ = writeln!(
            s,
            r##"<rect x="{lx:.1}" y="{:.1}" width="16" height="10" fill="{fill}" stroke="#999999" stroke-width="0.5"/><text x="{:.1}" y="{row1:.1}" font-size="10" fill="#333333">{name}</text>"##,
            row1 - 9.0,
            lx + 20.0
        );
        lx += 30.0 + name.len() as f64 * 6.0;
    }
    let _ = writeln!(
        s,
        r##"<rect x="{lx:.1}" y="{:.1}" width="16" height="10" fill="{C_FOLLOWER}"/><rect x="{lx:.1}" y="{:.1}" width="16" height="10" fill="url(#hatch)" stroke="#999999" stroke-width="0.5"/><text x="{:.1}" y="{row1:.1}" font-size="10" fill="#333333">paused</text>"##,
        row1 - 9.0,
        row1 - 9.0,
        lx + 20.0
    );
    lx += 66.0;
    let _ = writeln!(
        s,
        r##"<rect x="{lx:.1}" y="{:.1}" width="16" height="10" fill="{C_FAULT}" fill-opacity="0.13" stroke="{C_FAULT}" stroke-width="0.5" stroke-dasharray="3,2"/><text x="{:.1}" y="{row1:.1}" font-size="10" fill="#333333">network fault</text>"##,
        row1 - 9.0,
        lx + 20.0
    );
    lx += 104.0;
    let _ = writeln!(
        s,
        r##"<rect x="{lx:.1}" y="{:.1}" width="16" height="10" fill="{C_SPLIT}"/><text x="{:.1}" y="{row1:.1}" font-size="10" fill="#333333">split brain (≥2 claim)</text>"##,
        row1 - 9.0,
        lx + 20.0
    );
    lx += 150.0;
    let _ = writeln!(
        s,
        r##"<text x="{lx:.1}" y="{row1:.1}" font-size="10" fill="#333333">t3 = term, →n2 = its leader</text>"##
    );
    let row2 = legend_y + 18.0;
    let mut lx = LEFT;
    for kind in [
        ProcKind::Kill,
        ProcKind::Stop,
        ProcKind::Start,
        ProcKind::Pause,
        ProcKind::Resume,
    ] {
        let name = proc_name(kind);
        let _ = writeln!(
            s,
            r##"{}<text x="{:.1}" y="{row2:.1}" font-size="10" fill="#333333">{name}</text>"##,
            marker(kind, lx + 6.0, row2 - 4.0),
            lx + 16.0
        );
        lx += 30.0 + name.len() as f64 * 6.0;
    }
    s.push_str("</svg>\n");
    s
}

fn state_fill(state: &LogState) -> Option<&'static str> {
    match state {
        LogState::Unknown => None,
        LogState::Down => Some(C_DOWN),
        LogState::Up(View { role, .. }) => Some(match role {
            Role::Leader => C_LEADER,
            Role::Candidate => C_CANDIDATE,
            Role::Follower => C_FOLLOWER,
        }),
    }
}

/// The short text written into a segment: (text, colour, minimum width in px).
fn segment_text(state: &LogState) -> Option<(String, &'static str, f64)> {
    match state {
        LogState::Unknown => None,
        LogState::Down => Some(("down".to_string(), "#dddddd", 30.0)),
        LogState::Up(View { role, term, leader }) => match role {
            Role::Leader => Some((format!("t{term}"), "#ffffff", 22.0)),
            Role::Candidate => Some((format!("t{term}"), "#5a3a00", 22.0)),
            Role::Follower => leader.map(|l| (format!("→n{l}"), "#3a5a80", 30.0)),
        },
    }
}

fn state_text(state: &LogState) -> String {
    match state {
        LogState::Unknown => "unknown".to_string(),
        LogState::Down => "down".to_string(),
        LogState::Up(View { role, term, leader }) => {
            let role = match role {
                Role::Leader => "leader",
                Role::Candidate => "candidate",
                Role::Follower => "follower",
            };
            match leader {
                Some(l) => format!("{role}, term {term}, leader n{l}"),
                None => format!("{role}, term {term}, no leader"),
            }
        }
    }
}

fn proc_name(kind: ProcKind) -> &'static str {
    match kind {
        ProcKind::Kill => "kill",
        ProcKind::Stop => "stop",
        ProcKind::Start => "start",
        ProcKind::Pause => "pause",
        ProcKind::Resume => "resume",
    }
}

/// A small marker centred on (`x`, `y`).
fn marker(kind: ProcKind, x: f64, y: f64) -> String {
    match kind {
        ProcKind::Kill => format!(
            r##"<path d="M {a:.1} {b:.1} L {c:.1} {d:.1} M {a:.1} {d:.1} L {c:.1} {b:.1}" stroke="#ffffff" stroke-width="4"/><path d="M {a:.1} {b:.1} L {c:.1} {d:.1} M {a:.1} {d:.1} L {c:.1} {b:.1}" stroke="#c62828" stroke-width="2"/>"##,
            a = x - 4.0,
            b = y - 4.0,
            c = x + 4.0,
            d = y + 4.0
        ),
        ProcKind::Stop => format!(
            r##"<rect x="{:.1}" y="{:.1}" width="8" height="8" fill="#c62828" stroke="#ffffff" stroke-width="1"/>"##,
            x - 4.0,
            y - 4.0
        ),
        ProcKind::Start => format!(
            r##"<path d="M {:.1} {:.1} L {:.1} {:.1} L {x:.1} {:.1} Z" fill="#1b7a2e" stroke="#ffffff" stroke-width="1"/>"##,
            x - 5.0,
            y + 4.0,
            x + 5.0,
            y + 4.0,
            y - 5.0
        ),
        ProcKind::Pause => format!(
            r##"<rect x="{:.1}" y="{:.1}" width="3" height="9" fill="#263238" stroke="#ffffff" stroke-width="0.8"/><rect x="{:.1}" y="{:.1}" width="3" height="9" fill="#263238" stroke="#ffffff" stroke-width="0.8"/>"##,
            x - 4.0,
            y - 4.5,
            x + 1.0,
            y - 4.5
        ),
        ProcKind::Resume => format!(
            r##"<path d="M {:.1} {:.1} L {:.1} {y:.1} L {:.1} {:.1} Z" fill="#263238" stroke="#ffffff" stroke-width="1"/>"##,
            x - 4.0,
            y - 5.0,
            x + 5.0,
            x - 4.0,
            y + 5.0
        ),
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * mag >= raw * (1.0 - 1e-9) {
            return m * mag;
        }
    }
    10.0 * mag
}

/// Escapes text for XML content and attribute values.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::check::{evaluate, FaultWindow, ProcEvent};
    use electd_client::Event;
    use electd_client::NodeId;

    const MS: u64 = 1_000_000;

    fn ev(t_ms: u64, node: NodeId, role: Role, term: u64, leader: Option<NodeId>) -> Event {
        Event {
            seq: t_ms,
            t_mono_ns: 5_000 * MS + t_ms * MS,
            node_id: node,
            view: View { role, term, leader },
        }
    }

    /// A bully-like run: leader 5 isolated at 2 s (keeps claiming), 4 takes over on the other
    /// side, heal at 5 s, 5 wins back; node 2 is killed at 6 s and restarted at 7 s; node 3 is
    /// paused from 8 s to 9 s.
    fn sample_log() -> RunLog {
        let base = 5_000 * MS;
        let at = |ms: u64| base + ms * MS;
        let mut events = Vec::new();
        for n in 1..=5 {
            events.push(ev(0, n, Role::Candidate, 1, None));
        }
        events.push(ev(300, 5, Role::Leader, 1, Some(5)));
        for n in 1..=4 {
            events.push(ev(320 + n * 5, n, Role::Follower, 1, Some(5)));
        }
        for n in 1..=4 {
            events.push(ev(2600, n, Role::Candidate, 2, None));
        }
        events.push(ev(2900, 4, Role::Leader, 2, Some(4)));
        for n in 1..=3 {
            events.push(ev(2950, n, Role::Follower, 2, Some(4)));
        }
        events.push(ev(5200, 4, Role::Follower, 3, Some(5)));
        events.push(ev(5200, 5, Role::Leader, 3, Some(5)));
        for n in 1..=3 {
            events.push(ev(5250, n, Role::Follower, 3, Some(5)));
        }
        events.push(ev(7400, 2, Role::Follower, 3, Some(5)));
        RunLog {
            nodes: (1..=5).collect(),
            start_ns: base,
            end_ns: at(10_000),
            events,
            procs: vec![
                ProcEvent {
                    t_ns: at(6000),
                    node: 2,
                    kind: ProcKind::Kill,
                },
                ProcEvent {
                    t_ns: at(7000),
                    node: 2,
                    kind: ProcKind::Start,
                },
                ProcEvent {
                    t_ns: at(8000),
                    node: 3,
                    kind: ProcKind::Pause,
                },
                ProcEvent {
                    t_ns: at(9000),
                    node: 3,
                    kind: ProcKind::Resume,
                },
            ],
            faults: vec![
                FaultWindow {
                    start_ns: at(2000),
                    end_ns: at(5000),
                    label: "isolate n5 (1,2,3,4 | 5)".into(),
                    groups: vec![vec![1, 2, 3, 4], vec![5]],
                },
                FaultWindow {
                    start_ns: at(3500),
                    end_ns: at(4200),
                    label: "loss 30% <all>".into(),
                    groups: vec![],
                },
            ],
            heal_ns: Some(at(5000)),
            fault_ns: Some(at(2000)),
            quorum_mode: false,
        }
    }

    /// Checks that every tag is closed in order; returns the element names seen.
    fn balanced_tags(svg: &str) -> Result<Vec<String>, String> {
        let mut stack: Vec<String> = Vec::new();
        let mut names = Vec::new();
        let mut rest = svg;
        while let Some(open) = rest.find('<') {
            let close = rest[open..].find('>').ok_or("unterminated tag")? + open;
            let tag = &rest[open + 1..close];
            rest = &rest[close + 1..];
            if let Some(name) = tag.strip_prefix('/') {
                let top = stack.pop().ok_or(format!("stray </{name}>"))?;
                if top != name.trim() {
                    return Err(format!("</{name}> closes <{top}>"));
                }
            } else {
                let name: String = tag
                    .chars()
                    .take_while(|c| !c.is_whitespace() && *c != '/')
                    .collect();
                if name.is_empty() || tag.contains('<') {
                    return Err(format!("bad tag <{tag}>"));
                }
                names.push(name.clone());
                if !tag.ends_with('/') {
                    stack.push(name);
                }
            }
        }
        if stack.is_empty() {
            Ok(names)
        } else {
            Err(format!("unclosed: {stack:?}"))
        }
    }

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        std::env::temp_dir().join(format!("chaos-report-{tag}-{}-{nanos}", std::process::id()))
    }

    #[test]
    fn svg_is_well_formed_with_five_lanes() {
        let log = sample_log();
        let svg = timeline_svg(&log, "S4 bully <app> seed 1 & more");
        let names = balanced_tags(&svg).unwrap();
        assert_eq!(names[0], "svg");
        assert_eq!(svg.matches("<svg").count(), 1);
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches(r#"class="lane""#).count(), 5);
        for n in 1..=5 {
            assert!(svg.contains(&format!(">n{n}</text>")));
        }
        assert!(svg.contains("&lt;app&gt;") && svg.contains("&amp; more"));
        // 5 claims alone on its side from 2.9 s to 5.2 s while 4 claims: one split span.
        assert_eq!(svg.matches(r#"class="split""#).count(), 1);
        assert_eq!(svg.matches(r#"class="fault""#).count(), 2);
        assert_eq!(svg.matches(r#"class="proc""#).count(), 4);
    }

    #[test]
    fn writes_all_files_and_md_reads_well() {
        let log = sample_log();
        let mut bully = evaluate(&log, "bully", "S4", "app", 1, 2000);
        bully.messages.insert("heartbeat".into(), 120);
        bully.messages.insert("election".into(), 8);
        let counts = |n: u64| BTreeMap::from([("heartbeat".to_string(), n)]);
        bully.set_cost(&counts(0), &counts(20), &counts(120), 1.0, 4.0);
        let mut quorum_log = log.clone();
        quorum_log.quorum_mode = true;
        let quorum = evaluate(&quorum_log, "quorum", "S4", "app", 1, 2000);
        let skipped = RunResult::skipped("ring", "S4", "kernel", 1, "iptables needs root");
        let runs = vec![bully, quorum, skipped];

        let dir = temp_dir("write");
        let result = write_report(
            &dir,
            &runs,
            &[(
                "s4-bully-app-1".to_string(),
                log,
                "S4 bully app seed 1".to_string(),
            )],
        );
        let read = |name: &str| fs::read_to_string(dir.join(name));
        let (json, md, svg) = (
            read("report.json"),
            read("report.md"),
            read("s4-bully-app-1.svg"),
        );
        let _ = fs::remove_dir_all(&dir);
        result.unwrap();
        let (json, md, svg) = (json.unwrap(), md.unwrap(), svg.unwrap());

        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["runs"].as_array().unwrap().len(), 3);
        assert_eq!(v["runs"][0]["mode"], "bully");
        assert_eq!(v["runs"][0]["messages"]["heartbeat"], 120);
        assert_eq!(v["runs"][0]["election_safety"], serde_json::Value::Null);
        assert_eq!(v["runs"][2]["skipped"], "iptables needs root");
        let back: Vec<RunResult> = serde_json::from_value(v["runs"].clone()).unwrap();
        assert_eq!(back, runs);

        assert!(md.contains("## S4"));
        // quorum row first, then bully, then the skipped ring row.
        let q = md.find("| quorum | app |").unwrap();
        let b = md.find("| bully | app |").unwrap();
        let r = md.find("| ring | kernel |").unwrap();
        assert!(q < b && b < r);
        assert!(md.contains("| 128 |"), "{md}");
        assert!(
            md.contains("**bully**: 2 leaders at once, split brain up to 2.3 s"),
            "{md}"
        );
        assert!(md.contains("**quorum**: 2 leaders at once") && md.contains("(a safety failure)"));
        assert!(md.contains("skipped: iptables needs root"));
        let changes = runs[0].leader_changes as f64;
        assert!(
            md.contains(&format!(
                "| bully | 20.0 (heartbeat 20.0) | {:.1} (heartbeat {:.1}) | 1 |",
                20.0 / changes,
                20.0 / changes
            )),
            "{md}"
        );
        assert!(md.contains("![S4 bully app seed 1](s4-bully-app-1.svg)"));
        balanced_tags(&svg).unwrap();
    }

    #[test]
    fn rejects_stems_with_paths() {
        let dir = temp_dir("stem");
        let err = write_report(&dir, &[], &[("../x".into(), RunLog::default(), "x".into())]);
        assert_eq!(err.unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert!(!dir.exists());
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(1.0), 1.0);
        assert_eq!(nice_step(0.13), 0.2);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(0.0), 1.0);
        assert!((nice_step(0.03) - 0.05).abs() < 1e-12);
    }
}
