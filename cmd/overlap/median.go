package main

import "github.com/purecuda/overlap/internal/stats"

// median is stats.Median, by the name the commands use.
func median[T ~int64 | ~float64](xs []T) T { return stats.Median(xs) }
