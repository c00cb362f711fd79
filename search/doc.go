// Package search draws trials' configurations: at random, on a grid, from a scrambled Sobol
// sequence, or from BOHB's tree-structured Parzen estimator fitted on the results so far. It is
// pure: results and randomness (*rand.Rand) come in, configurations go out. The executor calls
// Initial when a run starts (samplers that do not learn) and Draw when a trial is first launched
// (tpe), and journals what they return, so that a resumed run never draws a trial twice.
package search
