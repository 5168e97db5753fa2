//! A measured value as parsers produce it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub metric: String,
    pub value: f64,
    pub unit: String,
}
/// A value the tool could not measure, with the reason (bonnie++ prints `+++++` when an operation was too fast to time).
#[derive(Debug, Clone, PartialEq)]
pub struct Missing {
    pub metric: String,
    pub reason: String,
}
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Parsed {
    pub samples: Vec<Sample>,
    pub missing: Vec<Missing>,
}
