//! The column layout of a stored row type: each field's column name, in the order serde
//! writes it, with the type its values are stored as. `#[derive(Columns)]` reads it off the
//! struct, so a table's schema follows its fields and cannot drift from them; the results
//! store turns it into a Parquet schema (`stratlab_results::Table::schema`).
//!
//! A field's type says its column's type through [`ColumnValue`]: integers, floats, bools
//! and strings as themselves, `Option<T>` as `T` (every column is nullable), `Vec<T>` as a
//! list of `T`, and a named value stored as its serde name (an enum such as a precision)
//! as [`ColumnType::Text`] ([`text_column!`]). `#[serde(flatten)]` splices in the columns of
//! the flattened type, `#[serde(rename = "…")]` renames, `#[serde(skip)]` leaves out.

pub use stratlab_columns_derive::Columns;

/// How a column's values are stored.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ColumnType {
    /// `true`/`false`.
    Boolean,
    /// Signed 32-bit integers.
    Int32,
    /// Signed 64-bit integers.
    Int64,
    /// Unsigned 32-bit integers.
    UInt32,
    /// Unsigned 64-bit integers.
    UInt64,
    /// 64-bit floats.
    Float64,
    /// UTF-8 text: strings, and named values stored by their serde name.
    Text,
    /// A list of values of one type in each cell.
    List(Box<ColumnType>),
}

/// One column of a row type: its name and what it stores.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Column {
    /// The column's name, as serde names the field.
    pub name: &'static str,
    /// What its values are stored as.
    pub column_type: ColumnType,
}

/// A row type whose fields are columns; derive it with `#[derive(Columns)]`.
pub trait Columns {
    /// The columns in the order serde writes the fields, flattened fields spliced in.
    fn columns() -> Vec<Column>;
}

/// A field type's column type.
pub trait ColumnValue {
    /// What values of this type are stored as.
    fn column_type() -> ColumnType;
}

macro_rules! primitive_columns {
    ($($rust:ty => $column:ident),* $(,)?) => {
        $(impl ColumnValue for $rust {
            fn column_type() -> ColumnType {
                ColumnType::$column
            }
        })*
    };
}

primitive_columns!(
    bool => Boolean,
    i32 => Int32,
    i64 => Int64,
    u32 => UInt32,
    u64 => UInt64,
    // Counts (steps, epochs, samples) are stored signed, as the tables always had them.
    usize => Int64,
    f64 => Float64,
    String => Text,
);

impl<T: ColumnValue> ColumnValue for Option<T> {
    fn column_type() -> ColumnType {
        T::column_type()
    }
}

impl<T: ColumnValue> ColumnValue for Vec<T> {
    fn column_type() -> ColumnType {
        ColumnType::List(Box::new(T::column_type()))
    }
}

/// Declares that each named type is stored as text (its serde name, or the string its
/// serde writes): `text_column!(Precision, MemoryFormat);`. Invoke it beside the types.
#[macro_export]
macro_rules! text_column {
    ($($rust:ty),* $(,)?) => {
        $(impl $crate::ColumnValue for $rust {
            fn column_type() -> $crate::ColumnType {
                $crate::ColumnType::Text
            }
        })*
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    enum Colour {}
    text_column!(Colour);

    #[test]
    fn field_types_name_their_column_types() {
        assert_eq!(<Option<u64>>::column_type(), ColumnType::UInt64);
        assert_eq!(<Vec<u64>>::column_type(), ColumnType::List(Box::new(ColumnType::UInt64)));
        assert_eq!(<Option<Colour>>::column_type(), ColumnType::Text);
        assert_eq!(String::column_type(), ColumnType::Text);
    }
}
