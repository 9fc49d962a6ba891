//! The shapes of the generated protocol tables in `spec.rs`.

/// The wire type of a method argument or a content property.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgType {
    Octet,
    Short,
    Long,
    LongLong,
    Bit,
    ShortStr,
    LongStr,
    Timestamp,
    Table,
}

/// What a method argument takes when the caller leaves it out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Default {
    /// No default: leaving it out is an error ("Missing value for mandatory field").
    Mandatory,
    Num(f64),
    Bool(bool),
    Str(&'static str),
    EmptyTable,
}

#[derive(Debug)]
pub struct Arg {
    pub name: &'static str,
    pub ty: ArgType,
    pub default: Default,
    /// Values of this field repeat across messages, so they go through the string table.
    pub intern: bool,
}

impl Arg {
    /// Slots this argument takes in the fixed part of an event on the tape.
    pub fn slots(&self) -> usize {
        if self.ty == ArgType::Table {
            2
        } else {
            1
        }
    }
}

#[derive(Debug)]
pub struct MethodSpec {
    pub id: u32,
    pub class_id: u16,
    pub method_id: u16,
    pub name: &'static str,
    pub has_content: bool,
    pub args: &'static [Arg],
}

#[derive(Debug)]
pub struct PropertiesSpec {
    pub class_id: u16,
    pub name: &'static str,
    pub args: &'static [Arg],
}

/// Fixed slots taken by a list of arguments.
pub fn fixed_slots(args: &[Arg]) -> usize {
    args.iter().map(Arg::slots).sum()
}
