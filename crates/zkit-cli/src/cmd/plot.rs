//! Latency percentile plots as SVG: `zkit bench server --plot FILE.svg`, and the side-by-side
//! chart `zkit-bench compare` writes next to docs/PERFORMANCE.md (crates/zkit-bench includes this
//! same file, so both draw the same way).
//!
//! The chart is HdrHistogram's percentile distribution: the x axis is the percentile on a
//! "nines" scale (0 %, 90 %, 99 %, 99.9 %, … evenly spaced: x = -log10(1 - p)), the y axis
//! the latency at that percentile on a log scale, one line per series (a server and an
//! operation mix). Pure: points in, SVG text out; the caller writes the file.

use anyhow::{anyhow, Result};
use hdrhistogram::Histogram;
use plotters::prelude::*;

/// One line of the chart: a label (e.g. `zkit get`) and its (percentile in %, latency in µs)
/// points, in increasing percentile.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// (percentile 0–100, latency in microseconds).
    pub points: Vec<(f64, u64)>,
}

/// Deepest percentile drawn: 99.9999 %, six nines.
const MAX_NINES: f64 = 6.0;
/// Samples per nine along the x axis.
const STEPS_PER_NINE: u32 = 20;

/// The nines coordinate of a percentile: 0 % → 0, 50 % → 0.30, 90 % → 1, 99 % → 2, 99.9 % → 3.
pub fn nines(percentile: f64) -> f64 {
    let rest = (1.0 - percentile / 100.0).max(10f64.powf(-MAX_NINES));
    -rest.log10()
}

/// The percentile at a nines coordinate (the inverse of [`nines`]).
fn percentile_at(nines: f64) -> f64 {
    100.0 * (1.0 - 10f64.powf(-nines))
}

/// A histogram's percentile distribution from the fastest sample (0 %) out to the deepest
/// percentile its sample count resolves (one in `len` samples), evenly spaced on the nines
/// scale. Empty for an empty histogram.
pub fn percentile_points(histogram: &Histogram<u64>) -> Vec<(f64, u64)> {
    if histogram.is_empty() {
        return Vec::new();
    }
    let deepest = (histogram.len() as f64)
        .log10()
        .clamp(nines(50.0), MAX_NINES);
    let mut points = Vec::new();
    let mut step = 0u32;
    loop {
        let x = (f64::from(step) / f64::from(STEPS_PER_NINE)).min(deepest);
        let p = percentile_at(x);
        points.push((p, histogram.value_at_quantile(p / 100.0)));
        if x >= deepest {
            return points;
        }
        step += 1;
    }
}

/// Colours of the series, in order (repeating).
const COLOURS: [RGBColor; 6] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
];

/// Draws `series` on one chart titled `title`, as an SVG document (`width` × `height` pixels).
/// Series without points (a run with no successful request) are left out; with none left it is
/// an error.
pub fn svg(title: &str, series: &[Series], width: u32, height: u32) -> Result<String> {
    let drawn: Vec<&Series> = series.iter().filter(|s| !s.points.is_empty()).collect();
    if drawn.is_empty() {
        return Err(anyhow!("no latency samples to plot"));
    }
    let x_max = drawn
        .iter()
        .flat_map(|s| s.points.iter().map(|(p, _)| nines(*p)))
        .fold(2.0f64, f64::max)
        .ceil();
    // Latencies in ms on a log axis: a server's sync reads (tens of µs) and another's queued
    // tail (hundreds of ms) are both readable.
    let latencies = || {
        drawn
            .iter()
            .flat_map(|s| s.points.iter().map(|(_, us)| log_ms(*us)))
    };
    let y_min = latencies().fold(f64::INFINITY, f64::min) / 1.5;
    // Headroom above the curves for the legend.
    let y_max = latencies().fold(0.0f64, f64::max) * 3.0;

    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            // Room for the last percentile label, centred on the right edge.
            .margin_right(36)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(
                0.0..x_max,
                (y_min..y_max)
                    .log_scale()
                    .with_key_points(log_ticks(y_min, y_max)),
            )
            .map_err(draw_error)?;
        chart
            .configure_mesh()
            .x_desc("percentile")
            .y_desc("latency (ms)")
            // One label per nine (0%, 90%, 99%, …): ask for one per unit of the axis.
            .x_labels(x_max as usize + 1)
            .x_label_formatter(&|x| percentile_label(*x))
            .y_label_formatter(&|y| short_number(*y))
            .draw()
            .map_err(draw_error)?;
        for (i, s) in drawn.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            chart
                .draw_series(LineSeries::new(
                    s.points.iter().map(|(p, us)| (nines(*p), log_ms(*us))),
                    colour.stroke_width(2),
                ))
                .map_err(draw_error)?
                .label(s.label.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(draw_error)?;
        root.present().map_err(draw_error)?;
    }
    Ok(out)
}

/// A latency in µs as the chart's milliseconds; 0 µs (off a log axis) is drawn at 1 µs.
fn log_ms(us: u64) -> f64 {
    us.max(1) as f64 / 1000.0
}

/// The y ticks of a log axis from `min` to `max`: 1, 2 and 5 times each power of ten between
/// them, or only the powers of ten when that would crowd the axis.
pub fn log_ticks(min: f64, max: f64) -> Vec<f64> {
    if !(min > 0.0 && max > min && max.is_finite()) {
        return Vec::new();
    }
    let first = min.log10().floor() as i32;
    let last = max.log10().ceil() as i32;
    let ticks = |steps: &[f64]| -> Vec<f64> {
        (first..=last)
            .flat_map(|e| steps.iter().map(move |s| s * 10f64.powi(e)))
            .filter(|t| (min..=max).contains(t))
            .collect()
    };
    let dense = ticks(&[1.0, 2.0, 5.0]);
    if dense.len() <= 10 {
        dense
    } else {
        ticks(&[1.0])
    }
}

/// A tick's label: at most three significant digits, without trailing zeros (`200k`, `1.5M`,
/// `2`, `0.5`).
pub fn short_number(y: f64) -> String {
    let (value, suffix) = if y >= 1e6 {
        (y / 1e6, "M")
    } else if y >= 1e3 {
        (y / 1e3, "k")
    } else {
        (y, "")
    };
    let decimals = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else if value >= 1.0 {
        2
    } else {
        3
    };
    let mut text = format!("{value:.decimals$}");
    if text.contains('.') {
        text = text.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    text + suffix
}

/// `0%`, `90%`, `99%`, `99.9%`, … for a whole nines coordinate; nothing between them.
fn percentile_label(x: f64) -> String {
    if (x - x.round()).abs() > 1e-6 {
        return String::new();
    }
    let p = percentile_at(x.round());
    let decimals = (x.round() as usize).saturating_sub(2);
    format!("{p:.decimals$}%")
}

fn draw_error<E: std::error::Error + Send + Sync>(
    e: plotters::drawing::DrawingAreaErrorKind<E>,
) -> anyhow::Error {
    anyhow!("drawing the latency plot: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(base_us: u64, count: u64) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, 60_000_000, 3).unwrap();
        for i in 0..count {
            // A long tail: most near base, one in a hundred 10× slower.
            let us = if i % 100 == 0 {
                base_us * 10
            } else {
                base_us + i % 50
            };
            h.record(us).unwrap();
        }
        h
    }

    #[test]
    fn log_ticks_are_one_two_five_per_decade_within_the_range() {
        assert_eq!(log_ticks(1.3, 21.5), vec![2.0, 5.0, 10.0, 20.0]);
        assert_eq!(
            log_ticks(30_000.0, 1_600_000.0),
            vec![50_000.0, 100_000.0, 200_000.0, 500_000.0, 1_000_000.0]
        );
        // Seven decades: 1, 2, 5 of each would be 19 ticks; only the powers of ten.
        assert_eq!(
            log_ticks(0.5, 20_000_000.0),
            vec![1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6, 1e7]
        );
        assert!(log_ticks(0.0, 10.0).is_empty());
        assert!(log_ticks(5.0, 5.0).is_empty());
    }

    #[test]
    fn tick_labels_are_short() {
        let labels: Vec<String> = [
            1_000_000.0,
            1_500_000.0,
            200_000.0,
            50_000.0,
            20.0,
            2.0,
            0.5,
            0.02,
        ]
        .into_iter()
        .map(short_number)
        .collect();
        assert_eq!(
            labels,
            ["1M", "1.5M", "200k", "50k", "20", "2", "0.5", "0.02"]
        );
    }

    #[test]
    fn nines_scale() {
        assert!((nines(90.0) - 1.0).abs() < 1e-9);
        assert!((nines(99.9) - 3.0).abs() < 1e-9);
        assert_eq!(percentile_label(0.0), "0%");
        assert_eq!(percentile_label(1.5), "");
        assert_eq!(percentile_label(2.0), "99%");
        assert_eq!(percentile_label(4.0), "99.99%");
    }

    #[test]
    fn points_cover_fastest_to_resolved_tail_and_rise() {
        let points = percentile_points(&histogram(200, 10_000));
        assert_eq!(points[0], (0.0, 200), "starts at the fastest sample");
        let last = points.last().unwrap().0;
        assert!(
            (nines(last) - 4.0).abs() < 1e-9,
            "10,000 samples resolve 99.99%: {last}"
        );
        assert!(points
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert!(
            points.last().unwrap().1 >= 1990,
            "the 10x tail is drawn: {points:?}"
        );
        assert!(percentile_points(&Histogram::new(3).unwrap()).is_empty());
    }

    #[test]
    fn two_servers_on_one_well_formed_svg() {
        let series = vec![
            Series {
                label: "zkit mixed:90".into(),
                points: percentile_points(&histogram(150, 5000)),
            },
            Series {
                label: "Apache ZooKeeper mixed:90".into(),
                points: percentile_points(&histogram(400, 5000)),
            },
        ];
        let out = svg("latency", &series, 800, 500).unwrap();
        let body = out.trim();
        assert!(body.starts_with("<svg"), "{}", &body[..body.len().min(200)]);
        assert!(body.ends_with("</svg>"));
        assert_eq!(body.matches("<svg").count(), 1);
        // One line per series: the polylines of more than two points (ticks and the legend's
        // swatches are two-point paths).
        let lines = body
            .split("<polyline")
            .skip(1)
            .filter(|l| {
                let points = l
                    .split("points=\"")
                    .nth(1)
                    .and_then(|p| p.split('"').next());
                points.is_some_and(|p| p.split_whitespace().count() > 2)
            })
            .count();
        assert_eq!(lines, 2, "{body}");
        for label in [
            "zkit mixed:90",
            "Apache ZooKeeper mixed:90",
            "percentile",
            "latency (ms)",
        ] {
            assert!(body.contains(label), "{label:?} missing");
        }
        assert!(body.contains("99.9%"), "the nines axis is labelled");
        // 150 µs to 4 ms on a log axis: labelled at 1, 2 and 5 of each decade.
        for tick in ["0.2", "0.5", "1", "2", "5"] {
            assert!(
                body.contains(&format!(">\n{tick}\n</text>")),
                "latency tick {tick} missing"
            );
        }
        assert!(svg("empty", &[], 800, 500).is_err());
    }
}
