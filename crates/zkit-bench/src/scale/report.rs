//! The pure part of `zkit-bench scale`: the figures of one axis, the memory each unit of the
//! axis costs (ΔRSS/Δx between points), the Markdown table of an axis, its section of
//! docs/SCALE.md, and its chart (throughput and p99 against the axis, log x) as SVG. Figures
//! in, text out; the caller measures and writes the files.

use std::fmt::Write as _;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use crate::plot::{log_ticks, short_number};

/// One of the axes the server is scaled along.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    /// Concurrent sessions, all of them sending requests.
    Sessions,
    /// Znodes in the tree.
    Znodes,
    /// Data watches registered (on distinct znodes).
    Watchers,
    /// Bytes per znode value.
    ValueSize,
}

impl Axis {
    /// All axes, in report order.
    pub const ALL: [Axis; 4] = [
        Axis::Sessions,
        Axis::Znodes,
        Axis::Watchers,
        Axis::ValueSize,
    ];

    /// The axis's name on the command line, in its section's marker and in its SVG's name.
    pub fn slug(self) -> &'static str {
        match self {
            Axis::Sessions => "sessions",
            Axis::Znodes => "znodes",
            Axis::Watchers => "watchers",
            Axis::ValueSize => "value-size",
        }
    }

    /// The axis's name in titles and table headers.
    pub fn title(self) -> &'static str {
        match self {
            Axis::Sessions => "sessions",
            Axis::Znodes => "znodes",
            Axis::Watchers => "watchers",
            Axis::ValueSize => "value size",
        }
    }

    /// What one unit of the axis is, for the memory column ("per session"), or `None` where
    /// memory per unit is not meaningful (value size: the bytes are the point).
    pub fn unit(self) -> Option<&'static str> {
        match self {
            Axis::Sessions => Some("session"),
            Axis::Znodes => Some("znode"),
            Axis::Watchers => Some("watch"),
            Axis::ValueSize => None,
        }
    }

    /// `x` as the table and the chart print it: a count with thousands as k and M, a size
    /// with B, KB and MB (decimal).
    pub fn format_x(self, x: u64) -> String {
        let (suffix_k, suffix_m, space) = match self {
            Axis::ValueSize => ("KB", "MB", " "),
            _ => ("k", "M", ""),
        };
        let unit = if self == Axis::ValueSize { " B" } else { "" };
        if x >= 1_000_000 && x % 1_000_000 == 0 {
            format!("{}{space}{suffix_m}", x / 1_000_000)
        } else if x >= 1000 && x % 1000 == 0 {
            format!("{}{space}{suffix_k}", x / 1000)
        } else {
            format!("{x}{unit}")
        }
    }

    /// Parses an axis name.
    pub fn parse(text: &str) -> Result<Axis> {
        Axis::ALL
            .into_iter()
            .find(|a| a.slug() == text)
            .ok_or_else(|| {
                anyhow!("unknown axis {text:?}: expected sessions, znodes, watchers or value-size")
            })
    }
}

/// The figures of one point of an axis.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Point {
    /// The axis value (sessions, znodes, watches, bytes).
    pub x: u64,
    /// Sessions of the workload.
    pub sessions: usize,
    /// Requests in flight over all sessions.
    pub inflight: usize,
    /// Successful requests per second of the workload.
    pub ops_per_sec: f64,
    /// Median latency, µs.
    pub p50_us: u64,
    /// 99th percentile latency, µs.
    pub p99_us: u64,
    /// Requests answered with an error.
    pub errors: u64,
    /// Server CPU during the workload, % of one core.
    pub cpu_percent: Option<f64>,
    /// The load generator's CPU (user + system) over its whole run, set-up and clean-up of its
    /// znodes included, % of one core.
    pub generator_cpu_percent: Option<f64>,
    /// Server RSS with the point's state set up, before the workload (bytes).
    pub rss: Option<u64>,
    /// Highest server RSS sampled during the workload (bytes).
    pub peak_rss: Option<u64>,
    /// An axis-specific rate, per second: znodes created while setting up (znodes), watch
    /// events delivered when all watched znodes are written (watchers).
    pub setup_rate: Option<f64>,
}

/// One axis's run: the server's RSS before any state was set up, then the points in
/// increasing `x`.
#[derive(Debug, Clone, PartialEq)]
pub struct AxisRun {
    /// Which axis.
    pub axis: Axis,
    /// The workload, as `zkit bench server` names it plus its shape (for the doc).
    pub workload: String,
    /// Server RSS of the fresh server, before the first point's state (bytes).
    pub baseline_rss: Option<u64>,
    /// The points.
    pub points: Vec<Point>,
    /// Load average before and after the axis.
    pub load: (String, String),
}

/// Bytes of RSS each unit of the axis added between a point and the one before it (the first
/// point against the fresh server's baseline at x = 0). `None` where an RSS is missing or x
/// did not grow. Negative when RSS fell (the allocator returned memory).
pub fn per_unit_memory(baseline: Option<u64>, points: &[Point]) -> Vec<Option<f64>> {
    let mut previous = (0u64, baseline);
    points
        .iter()
        .map(|p| {
            let (x0, rss0) = previous;
            previous = (p.x, p.rss);
            let (rss0, rss1) = (rss0?, p.rss?);
            if p.x <= x0 {
                return None;
            }
            Some((rss1 as f64 - rss0 as f64) / (p.x - x0) as f64)
        })
        .collect()
}

fn mib(bytes: Option<u64>) -> String {
    bytes.map_or("?".into(), |b| format!("{:.1} MiB", b as f64 / 1048576.0))
}

fn bytes(b: f64) -> String {
    if b.abs() >= 1048576.0 {
        format!("{:.1} MiB", b / 1048576.0)
    } else if b.abs() >= 10240.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

fn percent(p: Option<f64>) -> String {
    p.map_or("?".into(), |c| format!("{c:.0} %"))
}

fn millis(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

/// The Markdown table of one axis.
pub fn table(run: &AxisRun) -> String {
    let axis = run.axis;
    let per_unit = per_unit_memory(run.baseline_rss, &run.points);
    let mut header = format!(
        "| {} | sessions × in flight | ops/s | p50 ms | p99 ms | errors | server CPU | load generator CPU | RSS |",
        axis.title()
    );
    let mut rule = "|---:|---:|---:|---:|---:|---:|---:|---:|---:|".to_string();
    if let Some(unit) = axis.unit() {
        let _ = write!(header, " Δ RSS per {unit} |");
        rule.push_str("---:|");
    }
    let _ = write!(header, " peak RSS under load |");
    rule.push_str("---:|");
    match axis {
        Axis::Znodes => {
            header.push_str(" creates/s (setup) |");
            rule.push_str("---:|");
        }
        Axis::Watchers => {
            header.push_str(" watch events/s (all fired) |");
            rule.push_str("---:|");
        }
        _ => {}
    }
    let mut out = format!("{header}\n{rule}\n");
    for (p, unit) in run.points.iter().zip(&per_unit) {
        let total = p.inflight;
        let per = p.inflight / p.sessions.max(1);
        let _ = write!(
            out,
            "| {} | {} × {per} = {total} | {:.0} | {} | {} | {} | {} | {} | {} |",
            axis.format_x(p.x),
            p.sessions,
            p.ops_per_sec,
            millis(p.p50_us),
            millis(p.p99_us),
            p.errors,
            percent(p.cpu_percent),
            percent(p.generator_cpu_percent),
            mib(p.rss),
        );
        if axis.unit().is_some() {
            let _ = write!(out, " {} |", unit.map_or("–".into(), bytes));
        }
        let _ = write!(out, " {} |", mib(p.peak_rss));
        if matches!(axis, Axis::Znodes | Axis::Watchers) {
            let _ = write!(
                out,
                " {} |",
                p.setup_rate.map_or("–".into(), |r| format!("{r:.0}"))
            );
        }
        out.push('\n');
    }
    out
}

/// What run a section came from, for its text.
#[derive(Debug, Clone)]
pub struct RunInfo<'a> {
    /// The command line.
    pub command: &'a str,
    /// This machine.
    pub machine: &'a str,
    /// Seconds of each workload.
    pub seconds: u64,
    /// Small points (a smoke run).
    pub quick: bool,
    /// When the run started (UTC, as `date -u` prints it), if known.
    pub date: &'a str,
}

/// The generated section of docs/SCALE.md for one axis: title, workload, run, table, chart.
pub fn section_body(run: &AxisRun, info: &RunInfo<'_>, svg_link: Option<&str>) -> String {
    let axis = run.axis;
    let mut out = format!("## Against {}\n\n", axis.title());
    if info.quick {
        out.push_str("**A `--quick` smoke run: small points, read nothing into them.**\n\n");
    }
    let _ = writeln!(
        out,
        "Workload: {}; {} s per point, one fresh `zkit serve --fsync always` for the axis. \
         Baseline RSS (before the first point's state): {}.\n",
        run.workload,
        info.seconds,
        mib(run.baseline_rss)
    );
    if let Some(link) = svg_link {
        let _ = writeln!(
            out,
            "![throughput and p99 against {}]({link})\n",
            axis.title()
        );
    }
    out.push_str(&table(run));
    let _ = writeln!(
        out,
        "\n`{}` on {}, {}; load average {} before, {} after.",
        info.command, info.machine, info.date, run.load.0, run.load.1
    );
    out
}

/// The name of an axis's section in docs/SCALE.md.
pub fn section_name(axis: Axis) -> String {
    format!("scale-{}", axis.slug())
}

/// One line of a chart panel: a label and its (x, y) points.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// Legend text.
    pub label: String,
    /// (axis value, figure) in increasing x; y > 0 (the chart's y axes are logarithmic).
    pub points: Vec<(f64, f64)>,
}

/// The two panels of an axis's chart: throughput lines (per second) and p99 lines (ms).
pub fn chart_lines(run: &AxisRun) -> (Vec<Line>, Vec<Line>) {
    let positive = |f: &dyn Fn(&Point) -> Option<f64>| -> Vec<(f64, f64)> {
        run.points
            .iter()
            .filter_map(|p| f(p).filter(|y| *y > 0.0).map(|y| (p.x as f64, y)))
            .collect()
    };
    let mut rates = vec![Line {
        label: "workload ops/s".into(),
        points: positive(&|p| Some(p.ops_per_sec)),
    }];
    match run.axis {
        Axis::Znodes => rates.push(Line {
            label: "creates/s while populating".into(),
            points: positive(&|p| p.setup_rate),
        }),
        Axis::Watchers => rates.push(Line {
            label: "watch events/s delivered".into(),
            points: positive(&|p| p.setup_rate),
        }),
        _ => {}
    }
    let latency = vec![
        Line {
            label: "p99".into(),
            points: positive(&|p| Some(p.p99_us as f64 / 1000.0)),
        },
        Line {
            label: "p50".into(),
            points: positive(&|p| Some(p.p50_us as f64 / 1000.0)),
        },
    ];
    (
        rates.into_iter().filter(|l| !l.points.is_empty()).collect(),
        latency
            .into_iter()
            .filter(|l| !l.points.is_empty())
            .collect(),
    )
}

const COLOURS: [RGBColor; 4] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
];

fn draw_error<E: std::fmt::Debug>(err: E) -> anyhow::Error {
    anyhow!("drawing the chart: {err:?}")
}

/// The chart of one axis as an SVG document: throughput on top, latency below, both against
/// the axis on a log scale (and log y). An error when there is nothing to draw.
pub fn svg(run: &AxisRun, width: u32, height: u32) -> Result<String> {
    let (rates, latency) = chart_lines(run);
    if rates.is_empty() && latency.is_empty() {
        return Err(anyhow!("no figures to plot for {}", run.axis.title()));
    }
    let xs = || {
        rates
            .iter()
            .chain(&latency)
            .flat_map(|l| l.points.iter().map(|p| p.0))
    };
    let x_min = xs().fold(f64::INFINITY, f64::min).max(1.0);
    let x_max = xs().fold(0.0f64, f64::max).max(x_min * 10.0);
    let axis = run.axis;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        let root = root
            .titled(
                &format!("zkit serve against {} (log scales)", axis.title()),
                ("sans-serif", 20),
            )
            .map_err(draw_error)?;
        let panels = root.split_evenly((2, 1));
        for (panel, (lines, y_desc)) in panels
            .iter()
            .zip([(&rates, "per second"), (&latency, "latency (ms)")])
        {
            if lines.is_empty() {
                continue;
            }
            let ys = || lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
            let y_min = ys().fold(f64::INFINITY, f64::min) / 1.5;
            // Headroom above the curves for the legend.
            let y_max = ys().fold(0.0f64, f64::max) * 4.0;
            let mut chart = ChartBuilder::on(panel)
                .margin(10)
                .margin_right(30)
                .x_label_area_size(36)
                .y_label_area_size(70)
                .build_cartesian_2d(
                    (x_min / 1.3..x_max * 1.3).log_scale(),
                    (y_min..y_max)
                        .log_scale()
                        .with_key_points(log_ticks(y_min, y_max)),
                )
                .map_err(draw_error)?;
            chart
                .configure_mesh()
                .x_desc(axis.title())
                .y_desc(y_desc)
                .light_line_style(TRANSPARENT)
                .x_label_formatter(&|x| axis_label(axis, *x))
                .y_label_formatter(&|y| short_number(*y))
                .draw()
                .map_err(draw_error)?;
            for (i, line) in lines.iter().enumerate() {
                let colour = COLOURS[i % COLOURS.len()];
                chart
                    .draw_series(LineSeries::new(
                        line.points.iter().copied(),
                        colour.stroke_width(2),
                    ))
                    .map_err(draw_error)?
                    .label(line.label.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                    });
                chart
                    .draw_series(
                        line.points
                            .iter()
                            .map(|&(x, y)| Circle::new((x, y), 3, colour.filled())),
                    )
                    .map_err(draw_error)?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(draw_error)?;
        }
        root.present().map_err(draw_error)?;
    }
    Ok(out)
}

/// The x label of a tick: the axis's own format at powers of ten, nothing between them.
fn axis_label(axis: Axis, x: f64) -> String {
    let exponent = x.log10();
    if x < 1.0 || (exponent - exponent.round()).abs() > 1e-6 {
        return String::new();
    }
    axis.format_x(10f64.powi(exponent.round() as i32) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(x: u64, rss: Option<u64>) -> Point {
        Point {
            x,
            sessions: 4,
            inflight: 32,
            ops_per_sec: 1000.0 + x as f64,
            p50_us: 500,
            p99_us: 2000 + x,
            rss,
            ..Point::default()
        }
    }

    #[test]
    fn memory_per_unit_is_the_rss_step_over_the_x_step() {
        let points = [
            point(10_000, Some(10_000_000)),
            point(100_000, Some(46_000_000)),
            point(1_000_000, None),
            point(2_000_000, Some(500_000_000)),
        ];
        let per = per_unit_memory(Some(8_000_000), &points);
        // The first point against the baseline at x = 0: 2 MB over 10,000 znodes.
        assert_eq!(per[0], Some(200.0));
        // The step from the point before, 36 MB over 90,000 (not 38 MB over 100,000 from the
        // baseline).
        assert_eq!(per[1], Some(400.0));
        // No RSS at this point, and so none for the step after it either.
        assert_eq!(per[2], None);
        assert_eq!(per[3], None);
        assert_eq!(per_unit_memory(None, &points[..1]), vec![None]);
        // RSS that fell gives a negative figure, not a wrapped one.
        let fell = per_unit_memory(Some(20_000_000), &points[..1]);
        assert_eq!(fell, vec![Some(-1000.0)]);
        // An x that did not grow gives nothing rather than a division by zero.
        let same = [point(5, Some(1)), point(5, Some(2))];
        assert_eq!(per_unit_memory(Some(0), &same)[1], None);
    }

    #[test]
    fn table_has_a_row_per_point_and_the_axis_columns() {
        let run = AxisRun {
            axis: Axis::Znodes,
            workload: "mixed:90".into(),
            baseline_rss: Some(8_000_000),
            points: vec![
                Point {
                    setup_rate: Some(12_345.0),
                    ..point(10_000, Some(10_000_000))
                },
                point(100_000, Some(28_000_000)),
            ],
            load: ("1.0".into(), "2.0".into()),
        };
        let t = table(&run);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert!(lines[0].contains("Δ RSS per znode"), "{t}");
        assert!(lines[0].contains("creates/s"), "{t}");
        assert!(
            lines[0].contains("| server CPU | load generator CPU |"),
            "{t}"
        );
        assert!(lines[2].contains("| 0 | ? | ? | 9.5 MiB |"), "{t}");
        assert!(
            lines[2].starts_with("| 10k | 4 × 8 = 32 | 11000 | 0.50 | 12.00 |"),
            "{t}"
        );
        assert!(
            lines[2].contains("| 200 B |") && lines[2].contains("| 12345 |"),
            "{t}"
        );
        assert!(lines[3].ends_with("| – |"), "{t}");
        // Every row has as many cells as the header.
        let cells = |l: &str| l.matches('|').count();
        assert!(lines.iter().all(|l| cells(l) == cells(lines[0])), "{t}");

        let sizes = AxisRun {
            axis: Axis::ValueSize,
            ..run.clone()
        };
        let t = table(&sizes);
        assert!(!t.contains("Δ RSS per"), "{t}");
        assert!(t.lines().nth(2).unwrap().starts_with("| 10 KB |"), "{t}");
    }

    #[test]
    fn axis_values_print_and_parse() {
        assert_eq!(Axis::Sessions.format_x(1024), "1024");
        assert_eq!(Axis::Znodes.format_x(10_000_000), "10M");
        assert_eq!(Axis::Watchers.format_x(100_000), "100k");
        assert_eq!(Axis::ValueSize.format_x(10), "10 B");
        assert_eq!(Axis::ValueSize.format_x(1_000_000), "1 MB");
        for axis in Axis::ALL {
            assert_eq!(Axis::parse(axis.slug()).unwrap(), axis);
        }
        assert!(Axis::parse("bogus").is_err());
    }

    #[test]
    fn chart_lines_leave_out_missing_and_zero_figures() {
        let mut run = AxisRun {
            axis: Axis::Watchers,
            workload: "mixed:90".into(),
            baseline_rss: None,
            points: vec![point(1000, None), point(10_000, None)],
            load: (String::new(), String::new()),
        };
        run.points[1].setup_rate = Some(5000.0);
        run.points[0].ops_per_sec = 0.0;
        let (rates, latency) = chart_lines(&run);
        assert_eq!(rates.len(), 2);
        assert_eq!(rates[0].points, vec![(10_000.0, 11_000.0)]);
        assert_eq!(rates[1].points, vec![(10_000.0, 5000.0)]);
        assert_eq!(latency[0].points, vec![(1000.0, 3.0), (10_000.0, 12.0)]);
        let svg = svg(&run, 800, 600).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("watch events/s delivered"));
        run.points.clear();
        assert!(super::svg(&run, 800, 600).is_err());
    }

    #[test]
    fn section_names_the_run_and_links_the_chart() {
        let run = AxisRun {
            axis: Axis::Sessions,
            workload: "mixed:90".into(),
            baseline_rss: Some(1 << 20),
            points: vec![point(1, Some(2 << 20))],
            load: ("3.1".into(), "4.2".into()),
        };
        let info = RunInfo {
            command: "scripts/bench-scale",
            machine: "2 CPUs",
            seconds: 5,
            quick: false,
            date: "today",
        };
        let body = section_body(&run, &info, Some("scale/sessions.svg"));
        assert!(body.starts_with("## Against sessions\n"), "{body}");
        assert!(body.contains("![throughput and p99 against sessions](scale/sessions.svg)"));
        assert!(
            body.contains("load average 3.1 before, 4.2 after"),
            "{body}"
        );
        assert!(!body.contains("--quick"));
        // Replacing the section in a doc keeps the hand-written text around it.
        let doc = "# Scale\n\nhand-written\n";
        let once = crate::section::replace_section(doc, &section_name(run.axis), &body);
        let twice = crate::section::replace_section(&once, &section_name(run.axis), "## new");
        assert!(twice.starts_with(doc.trim_end()) && twice.contains("## new"));
        assert!(!twice.contains("Against sessions"), "{twice}");
    }
}
