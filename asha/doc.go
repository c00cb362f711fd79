// Package asha is asynchronous successive halving's promotion rule (Li et al., MLSys 2020) as a
// pure state machine over an ASHA job's rungs: which job a free slot takes next (a promotion, the
// highest rung first, or a new trial) and what each result changes. The simulator runs it over
// random ranks to predict an ASHA job's cost and duration; nothing in it reads a clock or draws a
// random number.
package asha
