//! throughput.svg: end-to-end msgs/s per system, grouped by batch size, and
//! (g)'s fan-out deliveries/s as one more group (plotters' SVG backend only:
//! no font libraries needed).

use std::path::Path;

use plotters::prelude::*;

use crate::brokers::System;
use crate::scenario::end_to_end::E2eRun;
use crate::scenario::fan_out;
use crate::Result;

const COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(114, 183, 235),
    RGBColor(214, 39, 40),
    RGBColor(255, 152, 150),
];

/// A labelled group of bars, one per system that ran.
struct Group<'a> {
    label: String,
    runs: Vec<&'a E2eRun>,
}

/// (b)'s runs by batch size, then (g)'s.
fn groups<'a>(end_to_end: &'a [E2eRun], fan_out: &'a [E2eRun]) -> Vec<Group<'a>> {
    let mut batches: Vec<usize> = end_to_end.iter().map(|r| r.batch).collect();
    batches.sort_unstable();
    batches.dedup();
    let mut groups: Vec<Group> = batches
        .into_iter()
        .map(|batch| Group {
            label: format!("batch {batch}"),
            runs: end_to_end.iter().filter(|r| r.batch == batch).collect(),
        })
        .collect();
    if let Some(first) = fan_out.first() {
        groups.push(Group {
            label: format!("fan-out ×{}, batch {}", fan_out::GROUPS, first.batch),
            runs: fan_out.iter().collect(),
        });
    }
    groups
}

pub fn throughput(end_to_end: &[E2eRun], fan_out: &[E2eRun], path: &Path) -> Result<()> {
    let groups = groups(end_to_end, fan_out);
    if groups.is_empty() {
        return Ok(());
    }
    let top = end_to_end
        .iter()
        .chain(fan_out)
        .map(|r| r.measured.per_second)
        .fold(1.0, f64::max)
        * 1.4; // headroom for the legend

    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "End to end push → pop → ack (msgs/s acked; fan-out: summed over groups)",
            ("sans-serif", 22),
        )
        .margin(20)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..groups.len() as f64, 0f64..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("msgs/s")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;

    let width = 0.8 / System::ALL.len() as f64;
    for (s, system) in System::ALL.into_iter().enumerate() {
        let colour = COLOURS[s];
        let bars: Vec<(f64, f64)> = groups
            .iter()
            .enumerate()
            .flat_map(|(g, group)| {
                group
                    .runs
                    .iter()
                    .filter(|r| r.system == system)
                    .map(move |r| (g as f64 + 0.1 + s as f64 * width, r.measured.per_second))
            })
            .collect();
        chart
            .draw_series(
                bars.iter().map(|&(x, v)| {
                    Rectangle::new([(x, 0.0), (x + width * 0.95, v)], colour.filled())
                }),
            )?
            .label(system.name())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 12, y + 6)], colour.filled()));
        chart.draw_series(bars.iter().map(|&(x, v)| {
            Text::new(format!("{v:.0}"), (x, v + top * 0.01), ("sans-serif", 11))
        }))?;
    }
    for (g, group) in groups.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(g as f64 + 0.5, 0.0));
        root.draw(&Text::new(
            group.label.clone(),
            (x - 30, y + 12),
            ("sans-serif", 15),
        ))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
