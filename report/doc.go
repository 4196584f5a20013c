// Package report draws the self-contained HTML pages (inline SVG, no scripts, no external
// files) of `sluice bench --report` and `sluice chaos run`: a header with the run's settings,
// the Sluice version and the machine (cores, memory, kernel, filesystem), charts over time that
// use the page's width with points finer than a second for short runs and labelled bands (a
// warm-up, a fault), and latency distributions as HdrHistogram plots them (the percentile
// spectrum).
//
// # Pieces
//
//   - page.go: Page (the header, an optional verdict, Sections of text, a Table and a row of
//     charts) and Write, the only entry point that renders.
//   - timechart.go: TimeChart, Series of Points over seconds since the run's start, and Bands,
//     coloured per Kind with a legend.
//   - spectrum.go: SpectrumChart and Spectrum, the percentile spectrum of an hdrhistogram.
//   - machine.go: Machine and DetectMachine (Linux files behind a build tag, empty elsewhere).
//   - svg.go: the geometry, axes, legend and lines the charts share.
//
// # Invariants
//
//   - The caller's data is data: every text it gives (a setting, a label, a driver's name) is
//     escaped, and every chart is well-formed XML on its own.
//   - Callers map their results onto these types (bench/htmlreport.go, chaos/report.go); this
//     package knows neither.
//   - A chart takes the width of its row (width 100%, a viewBox, its aspect ratio kept): a lone
//     chart the page's, two side by side half each, their text as large as a lone chart's.
package report
