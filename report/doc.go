// Package report draws the self-contained HTML pages (inline SVG, no scripts, no external
// files) of `sluice bench --report` and `sluice chaos run`: a header with the run's settings,
// the Sluice version and the machine (cores, memory, kernel, filesystem), charts over time that
// use the page's width with points finer than a second for short runs and labelled bands (a
// warm-up, a fault), and latency distributions as HdrHistogram plots them (the percentile
// spectrum). Stream C of issue #24 writes it, moving bench/htmlreport.go's drawing here.
package report
