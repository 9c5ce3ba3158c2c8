//! throughput.svg: end-to-end msgs/s per system, grouped by batch size
//! (plotters' SVG backend only: no font libraries needed).

use std::path::Path;

use plotters::prelude::*;

use crate::brokers::System;
use crate::scenario::end_to_end::E2eRun;
use crate::Result;

const COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(114, 183, 235),
    RGBColor(214, 39, 40),
    RGBColor(255, 152, 150),
];

pub fn throughput(runs: &[E2eRun], path: &Path) -> Result<()> {
    if runs.is_empty() {
        return Ok(());
    }
    let mut batches: Vec<usize> = runs.iter().map(|r| r.batch).collect();
    batches.sort_unstable();
    batches.dedup();
    let top = runs
        .iter()
        .map(|r| r.measured.per_second)
        .fold(1.0, f64::max)
        * 1.4; // headroom for the legend

    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "End to end push → pop → ack (msgs/s acked)",
            ("sans-serif", 22),
        )
        .margin(20)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..batches.len() as f64, 0f64..top)?;
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
        let bars: Vec<(f64, f64)> = runs
            .iter()
            .filter(|r| r.system == system)
            .filter_map(|r| {
                let g = batches.iter().position(|&b| b == r.batch)?;
                Some((g as f64 + 0.1 + s as f64 * width, r.measured.per_second))
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
    for (g, batch) in batches.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(g as f64 + 0.5, 0.0));
        root.draw(&Text::new(
            format!("batch {batch}"),
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
