//! The report of a matrix run (`docs/design/chaos.md`): `report.json` (every run), `report.md` (a
//! table per scenario and a short generated reading) and one SVG timeline per run the caller picks
//! (drawn by [`super::timeline`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::Path;

use serde::Serialize;

use super::timeline::timeline_svg;
use crate::chaos::record::RunLog;
use crate::chaos::verdict::{RunResult, HARNESS_NOTE};

/// Reads `dir/report.json`, judges every run again with this build's checkers from its stored
/// `runs/<scenario>-<mode>-<layer>-<seed>/runlog.json` (the log the run was judged on), and
/// rewrites `report.json` and `report.md` (keeping the timelines already in `dir`). What the
/// log does not hold stays as stored: the message cost, and a failed harness step (its note
/// and its failure). Answers how many runs were judged, and how many of them came out
/// different from what was stored.
pub fn rejudge(dir: &Path, converge_bound_ms: impl Fn(&str) -> u64) -> io::Result<(usize, usize)> {
    let text = fs::read_to_string(dir.join("report.json"))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(io::Error::other)?;
    let mut runs: Vec<RunResult> =
        serde_json::from_value(v["runs"].clone()).map_err(io::Error::other)?;
    let (mut judged, mut changed) = (0, 0);
    for r in &mut runs {
        let stored = dir
            .join("runs")
            .join(format!("{}-{}-{}-{}", r.scenario, r.mode, r.layer, r.seed));
        let Ok(bytes) = fs::read(stored.join("runlog.json")) else {
            continue;
        };
        let log: RunLog = serde_json::from_slice(&bytes).map_err(io::Error::other)?;
        let before = serde_json::to_value(&*r).map_err(io::Error::other)?;
        let bound = converge_bound_ms(&r.scenario);
        let mut again =
            crate::chaos::verdict::evaluate(&log, &r.mode, &r.scenario, &r.layer, r.seed, bound);
        again.messages = std::mem::take(&mut r.messages);
        again.steady_msgs_per_s = std::mem::take(&mut r.steady_msgs_per_s);
        again.msgs_per_election = r.msgs_per_election.take();
        again.skipped = r.skipped.take();
        for note in r.notes.iter().filter(|n| n.starts_with(HARNESS_NOTE)) {
            again.passed = false;
            again.notes.push(note.clone());
        }
        judged += 1;
        *r = again;
        if serde_json::to_value(&*r).map_err(io::Error::other)? != before {
            changed += 1;
        }
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
    Ok((judged, changed))
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
    out.push_str(&summary(runs));
    out.push_str(&cost_section(runs));
    out.push_str(&disruption_section(runs));
    for scenario in first_seen(runs.iter().map(|r| r.scenario.as_str())) {
        out.push_str(&scenario_section(runs, scenario));
    }
    out.push_str(&timelines_section(timelines));
    out
}

/// How many runs passed, failed and were skipped, and how to read the tables.
fn summary(runs: &[RunResult]) -> String {
    let skipped = runs.iter().filter(|r| r.skipped.is_some()).count();
    let passed = runs.iter().filter(|r| r.passed).count();
    let mut out = format!(
        "{} runs: {} passed, {} failed, {} skipped.\n\n",
        runs.len(),
        passed,
        runs.len() - passed - skipped,
        skipped
    );
    out.push_str(
        "Times are in ms, worst seed shown (as are max leaders); leader changes and messages \
         are means per run. *never*: in at least one seed no leader was agreed (failover) or the \
         cluster did not converge after heal. The lease-bound modes (quorum, mutex) pass with no \
         split brain at all, no broken promise, election safety and convergence within the \
         bound; bully, ring and invitation pass on convergence alone (their split brain is \
         expected under partitions and reported). Mutex mode's nodes talk only to their store: \
         a cut between nodes does not reach them, and C5 counts the terms of the row that a \
         node cut off from the other nodes took meanwhile.\n",
    );
    out
}

/// One scenario's section: the table (a row per mode and layer), a reading per mode, and the
/// failed or skipped runs.
fn scenario_section(runs: &[RunResult], scenario: &str) -> String {
    let in_scenario: Vec<&RunResult> = runs.iter().filter(|r| r.scenario == scenario).collect();
    let mut out = format!("\n## {scenario}\n\n");
    out.push_str(
        "| mode | layer | seeds | split brain ms | max leaders | leaderless ms | \
         majority-leaderless ms | failover ms | converge ms | leader changes | messages | \
         safety | promises | passed |\n",
    );
    out.push_str("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|\n");
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
    out.push_str(&troubled_section(&in_scenario));
    out
}

/// The failed and skipped runs of a scenario, with why; empty when there are none.
fn troubled_section(in_scenario: &[&RunResult]) -> String {
    let troubled: Vec<&RunResult> = in_scenario
        .iter()
        .copied()
        .filter(|r| !r.passed || r.skipped.is_some())
        .collect();
    if troubled.is_empty() {
        return String::new();
    }
    let mut out = String::from("\nFailed or skipped runs:\n\n");
    for r in troubled {
        let why = match &r.skipped {
            Some(reason) => format!("skipped: {reason}"),
            None if r.notes.is_empty() => "failed".to_string(),
            None => r.notes.join("; "),
        };
        let _ = writeln!(out, "- {} / {} / seed {}: {}", r.mode, r.layer, r.seed, why);
    }
    out
}

/// The timelines, with how to read them; empty when there are none.
fn timelines_section(timelines: &[(String, String)]) -> String {
    if timelines.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n## Timelines\n\n");
    out.push_str(
        "Lanes: green leader, amber candidate, pale blue follower, dark grey down, white \
         unknown, hatched paused. Red shading: network faults. Top strip: red where two or \
         more nodes claim at once.\n\n",
    );
    for (file, title) in timelines {
        let _ = writeln!(out, "### {title}\n\n![{title}]({file})\n");
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

/// quorum, mutex, bully, ring, invitation first, then any other mode in order of first
/// appearance.
fn modes_in_order<'a>(runs: &[&'a RunResult]) -> Vec<&'a str> {
    let mut modes = first_seen(runs.iter().map(|r| r.mode.as_str()));
    let rank = |m: &str| match m {
        "quorum" => 0,
        "mutex" => 1,
        "bully" => 2,
        "ring" => 3,
        "invitation" => 4,
        _ => 5,
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
            "| {mode} | {layer} | {seeds} | – | – | – | – | – | – | – | – | – | – | skipped |\n"
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
    // N1, where members don't vote (S26).
    let safety = if done
        .iter()
        .any(|r| r.nonvoter_claims.is_some_and(|n| n > 0))
    {
        format!("{safety}, **N1 violated**")
    } else if done.iter().any(|r| r.nonvoter_claims.is_some()) {
        format!("{safety}, N1 ok")
    } else {
        safety.to_string()
    };
    // C6: promises judged and broken, over the runs that recorded any.
    let judged: u64 = done.iter().filter_map(|r| r.promises).sum();
    let broken: u64 = done.iter().filter_map(|r| r.promises_broken).sum();
    let promises = if broken > 0 {
        format!("**{broken} of {judged} broken**")
    } else if done.iter().any(|r| r.promises.is_some()) {
        format!("{judged} kept")
    } else {
        "n/a".to_string()
    };
    let promises = promises + &role_cell(&done);
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
         {failover} | {converge} | {changes} | {messages} | {safety} | {promises} | {passed} |\n"
    )
}

/// The named roles' share of the promises cell (C6 per role, and how often roles moved), over
/// the runs that stood roles; empty when none did.
fn role_cell(done: &[&RunResult]) -> String {
    if done.iter().all(|r| r.role_promises.is_none()) {
        return String::new();
    }
    let judged: u64 = done.iter().filter_map(|r| r.role_promises).sum();
    let broken: u64 = done.iter().filter_map(|r| r.role_promises_broken).sum();
    let moves: u64 = done.iter().filter_map(|r| r.role_moves).sum();
    if broken > 0 {
        format!("; roles: **{broken} of {judged} broken**, {moves} moves")
    } else {
        format!("; roles: {judged} kept, {moves} moves")
    }
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
    let mut parts: Vec<String> = vec![split_words(mode, &done)];
    if done.iter().any(|r| r.election_safety == Some(false)) {
        parts.push("two leaders in one term (election safety violated)".to_string());
    }
    let leaderless = worst(&done, |r| r.leaderless_ms);
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
    parts.push(failover_words(&done));
    parts.push(converge_words(&done));
    let changes = done.iter().map(|r| r.leader_changes).max().unwrap_or(0);
    parts.push(format!(
        "up to {changes} leader change{}",
        if changes == 1 { "" } else { "s" }
    ));
    let passed = done.iter().filter(|r| r.passed).count();
    format!("**{mode}**: {}; {passed}/{n} passed.", parts.join("; "))
}

/// The largest `f` over the runs, 0 when none is larger.
fn worst(done: &[&RunResult], f: impl Fn(&RunResult) -> f64) -> f64 {
    done.iter().map(|r| f(r)).fold(0.0, f64::max)
}

/// The reading's words on split brain: how many leaders at once and for how long.
fn split_words(mode: &str, done: &[&RunResult]) -> String {
    let split = worst(done, |r| r.split_brain_ms);
    let max_leaders = done.iter().map(|r| r.max_leaders).max().unwrap_or(0);
    if split > 0.0 {
        let mut s = format!(
            "{max_leaders} leaders at once, split brain up to {}",
            human_ms(split)
        );
        if mode == "quorum" || done.iter().any(|r| r.election_safety.is_some()) {
            s.push_str(" (a safety failure)");
        }
        s
    } else if max_leaders == 0 {
        "no leader at all".to_string()
    } else {
        "0 ms split brain".to_string()
    }
}

/// The reading's words on failover: the worst, or in how many runs none was agreed.
fn failover_words(done: &[&RunResult]) -> String {
    let n = done.len();
    let failovers: Vec<f64> = done.iter().filter_map(|r| r.failover_ms).collect();
    if failovers.len() == n {
        format!(
            "failover in {}",
            human_ms(failovers.iter().copied().fold(0.0, f64::max))
        )
    } else if !failovers.is_empty() {
        format!(
            "no agreed leader after the fault in {} of {n} runs",
            n - failovers.len()
        )
    } else {
        "no failover measured (no agreed leader after the fault, or no fault)".to_string()
    }
}

/// The reading's words on convergence after heal.
fn converge_words(done: &[&RunResult]) -> String {
    let n = done.len();
    let converged: Vec<f64> = done.iter().filter_map(|r| r.converge_ms).collect();
    if converged.len() == n {
        format!(
            "converged {} after heal",
            human_ms(converged.iter().copied().fold(0.0, f64::max))
        )
    } else {
        format!("did not converge in {} of {n} runs", n - converged.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::fixtures::{balanced_tags, sample_log};
    use crate::chaos::verdict::evaluate;

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        std::env::temp_dir().join(format!("chaos-report-{tag}-{}-{nanos}", std::process::id()))
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
        quorum_log.leased = true;
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
    fn rejudging_recomputes_every_checker_and_keeps_what_the_log_lacks() {
        let log = sample_log();
        let mut good = evaluate(&log, "bully", "S4", "app", 1, 2000);
        good.messages.insert("heartbeat".into(), 120);
        let mut stale = good.clone();
        stale.seed = 2;
        stale.split_brain_ms = 0.0;
        stale.leaderless_ms = 1.0;
        let mut broke = good.clone();
        broke.seed = 3;
        broke.passed = false;
        broke.notes.push(format!("{HARNESS_NOTE}no agreed leader"));
        let no_log = RunResult::skipped("ring", "S4", "kernel", 1, "iptables needs root");
        let runs = vec![good.clone(), stale, broke, no_log.clone()];
        let dir = temp_dir("rejudge");
        write_report(&dir, &runs, &[]).unwrap();
        for seed in 1..=3 {
            let run = dir.join("runs").join(format!("S4-bully-app-{seed}"));
            fs::create_dir_all(&run).unwrap();
            fs::write(run.join("runlog.json"), serde_json::to_vec(&log).unwrap()).unwrap();
        }
        let counts = rejudge(&dir, |_| 2000);
        let text = fs::read_to_string(dir.join("report.json"));
        let _ = fs::remove_dir_all(&dir);
        assert_eq!(counts.unwrap(), (3, 1), "three logs, one stale verdict");
        let v: serde_json::Value = serde_json::from_str(&text.unwrap()).unwrap();
        let back: Vec<RunResult> = serde_json::from_value(v["runs"].clone()).unwrap();
        let with_seed = |r: &RunResult, seed| RunResult { seed, ..r.clone() };
        assert_eq!(back[0], good);
        assert_eq!(
            back[1],
            with_seed(&good, 2),
            "the stale figures are judged again"
        );
        assert!(!back[2].passed, "a failed harness step still fails the run");
        assert_eq!(back[2].notes, runs[2].notes);
        assert_eq!(back[2].messages, good.messages, "the cost is kept");
        assert_eq!(back[3], no_log, "a run without a log stays as it was");
    }

    #[test]
    fn rejects_stems_with_paths() {
        let dir = temp_dir("stem");
        let err = write_report(&dir, &[], &[("../x".into(), RunLog::default(), "x".into())]);
        assert_eq!(err.unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert!(!dir.exists());
    }
}
