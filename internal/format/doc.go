// Package format writes the numbers people read in rubberband's tables, progress lines, logs
// and dashboard the same way everywhere: money, durations, counted nouns and the binary's version.
//
// Money (Money) has cents from one dollar up and four decimals below it: a plan of $12.40 needs
// no tenths of a cent, and a small run's $0.0042 would read $0.00 with cents. JSON keeps the
// full float. A duration (Clock) is 12.3s below a minute (tenths matter in short jobs), m:ss
// below an hour and h:mm:ss above, as `time` and the nomad CLI print elapsed times.
package format
