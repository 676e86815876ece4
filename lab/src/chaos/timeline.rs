//! The SVG timeline of one run, built by hand: one lane per node coloured by role, fault windows
//! shaded, process faults marked, and a strip on top that turns red wherever two or more nodes
//! claim at once.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::checkers::{node_segments, split_brain, LogState, Segment, SplitBrain};
use super::record::{FaultWindow, ProcKind, RunLog};
use electd_client::{NodeId, Role, View};

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
    let sc = Scale::of(log);
    let lanes = node_segments(log);
    let split = split_brain(log);
    let (faults, labels) = place_labels(log, &sc);
    let lay = Layout::new(&labels, lanes.len());
    let ticks = Ticks::of(&sc);

    let mut s = String::new();
    write_head(&mut s, &lay, title);
    write_grid(&mut s, &sc, &lay, &ticks);
    write_lanes(&mut s, &sc, &lay, &lanes);
    write_faults(&mut s, &sc, &lay, &faults, &labels);
    write_split_strip(&mut s, &sc, &split);
    write_proc_markers(&mut s, &sc, &lay, log, &lanes);
    write_axis(&mut s, &sc, &lay, &ticks);
    write_instants(&mut s, &sc, &lay, log);
    write_legend(&mut s, &lay);
    s.push_str("</svg>\n");
    s
}

/// The time scale: the run's span on the plot's width.
struct Scale {
    start: u64,
    end: u64,
    span: f64,
    plot_w: f64,
}

impl Scale {
    fn of(log: &RunLog) -> Scale {
        let start = log.start_ns;
        let end = log.end_ns.max(start + 1);
        Scale {
            start,
            end,
            span: (end - start) as f64,
            plot_w: WIDTH - LEFT - RIGHT,
        }
    }

    /// The x of time `t`, clamped to the run.
    fn x(&self, t: u64) -> f64 {
        LEFT + (t.clamp(self.start, self.end) - self.start) as f64 / self.span * self.plot_w
    }
}

/// Where each part goes, top to bottom: the split strip, the fault label rows, the lanes, the
/// axis, the legend.
struct Layout {
    rows_top: f64,
    lanes_top: f64,
    lanes_bottom: f64,
    axis_y: f64,
    legend_y: f64,
    height: f64,
}

impl Layout {
    fn new(labels: &[(usize, f64)], lanes: usize) -> Layout {
        let label_rows = labels
            .iter()
            .filter(|l| l.0 < MAX_LABEL_ROWS)
            .map(|l| l.0 + 1)
            .max()
            .unwrap_or(0);
        let rows_top = STRIP_Y + STRIP_H + 6.0;
        let lanes_top = rows_top + label_rows as f64 * LABEL_ROW_H + 6.0;
        let lanes_bottom = lanes_top + lanes as f64 * (LANE_H + LANE_GAP) - LANE_GAP;
        let axis_y = lanes_bottom + 8.0;
        let legend_y = axis_y + 60.0;
        Layout {
            rows_top,
            lanes_top,
            lanes_bottom,
            axis_y,
            legend_y,
            height: legend_y + 40.0,
        }
    }

    /// The top of lane `i`.
    fn lane_y(&self, i: usize) -> f64 {
        self.lanes_top + i as f64 * (LANE_H + LANE_GAP)
    }
}

/// The fault windows within the run, by start, and where each one's label goes: `(row, x)`,
/// each in the first row where it does not run into the previous one; row `MAX_LABEL_ROWS`
/// when none has room (the label is left out).
fn place_labels<'a>(log: &'a RunLog, sc: &Scale) -> (Vec<&'a FaultWindow>, Vec<(usize, f64)>) {
    let mut faults: Vec<_> = log
        .faults
        .iter()
        .filter(|w| w.end_ns > sc.start && w.start_ns < sc.end)
        .collect();
    faults.sort_by_key(|w| w.start_ns);
    let mut row_end = [f64::MIN; MAX_LABEL_ROWS];
    let mut labels: Vec<(usize, f64)> = Vec::new();
    for w in &faults {
        let width = w.label.chars().count() as f64 * 5.6 + 8.0;
        let lx = sc.x(w.start_ns).min(WIDTH - RIGHT - width) + 3.0;
        match row_end.iter().position(|&e| e <= lx) {
            Some(row) => {
                row_end[row] = lx + width;
                labels.push((row, lx));
            }
            None => labels.push((MAX_LABEL_ROWS, lx)),
        }
    }
    (faults, labels)
}

/// The time axis's ticks: every `step` seconds from 0 to the end of the run.
struct Ticks {
    at_s: Vec<f64>,
    span_s: f64,
    decimals: usize,
}

impl Ticks {
    fn of(sc: &Scale) -> Ticks {
        let span_s = sc.span / 1e9;
        let step = nice_step(span_s / 10.0);
        let decimals = if step >= 1.0 {
            0
        } else if step >= 0.1 {
            1
        } else {
            2
        };
        let mut at_s = Vec::new();
        let mut k = 0u64;
        loop {
            let ts = k as f64 * step;
            if ts > span_s + step * 1e-6 {
                break;
            }
            at_s.push(ts);
            k += 1;
        }
        Ticks {
            at_s,
            span_s,
            decimals,
        }
    }

    /// The x of tick `ts` (seconds into the run).
    fn x(&self, sc: &Scale, ts: f64) -> f64 {
        LEFT + ts / self.span_s * sc.plot_w
    }
}

/// The `<svg>` element, the title, the hatch pattern and the white background.
fn write_head(s: &mut String, lay: &Layout, title: &str) {
    let height = lay.height;
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
}

/// Vertical grid lines at the ticks, from the strip down to the axis.
fn write_grid(s: &mut String, sc: &Scale, lay: &Layout, ticks: &Ticks) {
    let axis_y = lay.axis_y;
    for &ts in &ticks.at_s {
        let tx = ticks.x(sc, ts);
        let _ = writeln!(
            s,
            r##"<line x1="{tx:.1}" y1="{STRIP_Y}" x2="{tx:.1}" y2="{axis_y:.1}" stroke="#e6e6e6" stroke-width="1"/>"##
        );
    }
}

/// One lane per node: its name, a frame, and its state segments.
fn write_lanes(s: &mut String, sc: &Scale, lay: &Layout, lanes: &[(NodeId, Vec<Segment>)]) {
    let plot_w = sc.plot_w;
    for (i, (node, segs)) in lanes.iter().enumerate() {
        let y = lay.lane_y(i);
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
            write_segment(s, sc, *node, y, seg);
        }
        s.push_str("</g>\n");
    }
}

/// One state segment of node `node`'s lane at height `y`: filled by role (with a tooltip),
/// hatched when paused, and labelled when wide enough.
fn write_segment(s: &mut String, sc: &Scale, node: NodeId, y: f64, seg: &Segment) {
    let start = sc.start;
    let x1 = sc.x(seg.from_ns);
    let w = (sc.x(seg.to_ns) - x1).max(0.0);
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

/// The fault windows over the lanes: shaded, edged, labelled where a row had room.
fn write_faults(
    s: &mut String,
    sc: &Scale,
    lay: &Layout,
    faults: &[&FaultWindow],
    labels: &[(usize, f64)],
) {
    let (start, end) = (sc.start, sc.end);
    let (rows_top, lanes_bottom) = (lay.rows_top, lay.lanes_bottom);
    for (w, &(row, lx)) in faults.iter().zip(labels) {
        let x1 = sc.x(w.start_ns);
        let x2 = sc.x(w.end_ns);
        let tip = format!(
            "{} [{}] {:.3}–{:.3} s",
            w.label,
            groups_text(&w.groups),
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
}

/// `1,2 | 3,4,5`.
fn groups_text(groups: &[Vec<NodeId>]) -> String {
    groups
        .iter()
        .map(|g| {
            g.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// The strip on top: red wherever two or more nodes claim at once, with how many.
fn write_split_strip(s: &mut String, sc: &Scale, split: &SplitBrain) {
    let plot_w = sc.plot_w;
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
        let x1 = sc.x(sp.from_ns);
        let w = (sc.x(sp.to_ns) - x1).max(1.5);
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
}

/// Process markers (kill, stop, start, pause, resume), on the top edge of their lane.
fn write_proc_markers(
    s: &mut String,
    sc: &Scale,
    lay: &Layout,
    log: &RunLog,
    lanes: &[(NodeId, Vec<Segment>)],
) {
    let (start, end) = (sc.start, sc.end);
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
            marker(p.kind, sc.x(p.t_ns), lay.lane_y(i))
        );
    }
}

/// The time axis: its line, a tick and a label in seconds at each tick, and its name.
fn write_axis(s: &mut String, sc: &Scale, lay: &Layout, ticks: &Ticks) {
    let axis_y = lay.axis_y;
    let decimals = ticks.decimals;
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" y1="{axis_y:.1}" x2="{:.1}" y2="{axis_y:.1}" stroke="#444444" stroke-width="1"/>"##,
        WIDTH - RIGHT
    );
    for &ts in &ticks.at_s {
        let tx = ticks.x(sc, ts);
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
}

/// The first fault and the heal: a dashed line from the strip to the axis, named below it.
fn write_instants(s: &mut String, sc: &Scale, lay: &Layout, log: &RunLog) {
    let axis_y = lay.axis_y;
    for (t, name) in [(log.fault_ns, "fault"), (log.heal_ns, "heal")] {
        let Some(t) = t.filter(|&t| t >= sc.start && t <= sc.end) else {
            continue;
        };
        let tx = sc.x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{tx:.2}" y1="{STRIP_Y}" x2="{tx:.2}" y2="{:.1}" stroke="#222222" stroke-width="1.2" stroke-dasharray="5,3"/><path d="M {tx:.1} {:.1} l -4 6 l 8 0 z" fill="#222222"/><text x="{tx:.1}" y="{:.1}" font-size="10" font-weight="bold" text-anchor="middle" fill="#222222">{name}</text>"##,
            axis_y,
            axis_y + 24.0,
            axis_y + 40.0
        );
    }
}

/// The legend: the lane colours, paused, network fault, split brain and the segment texts on
/// the first row; the process markers on the second.
fn write_legend(s: &mut String, lay: &Layout) {
    let row1 = lay.legend_y;
    let mut lx = LEFT;
    let swatches: [(&str, &str); 5] = [
        ("leader", C_LEADER),
        ("candidate", C_CANDIDATE),
        ("follower", C_FOLLOWER),
        ("down", C_DOWN),
        ("unknown", "#ffffff"),
    ];
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
    write_marker_legend(s, lay.legend_y + 18.0);
}

/// The legend's second row: each process marker and its name.
fn write_marker_legend(s: &mut String, row2: f64) {
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
    use crate::chaos::fixtures::{balanced_tags, sample_log};

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
    fn nice_steps() {
        assert_eq!(nice_step(1.0), 1.0);
        assert_eq!(nice_step(0.13), 0.2);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(0.0), 1.0);
        assert!((nice_step(0.03) - 0.05).abs() < 1e-12);
    }
}
