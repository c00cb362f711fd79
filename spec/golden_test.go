package spec

// goldenLR is the first lr SampleConfigs draws from testdata/full.yaml with seed 7.
const goldenLR = 0.00011942685314572126
