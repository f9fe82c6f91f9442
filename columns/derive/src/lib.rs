//! `#[derive(Columns)]` for `stratlab_columns`: a struct's columns from its named fields,
//! honouring the serde attributes that change what is written (`flatten`, `rename`,
//! `skip`). Anything else that would make the written columns differ from the fields
//! (`rename_all`, `skip_serializing`, tuple structs, enums) is refused at compile time
//! rather than guessed.

use proc_macro::TokenStream;
use quote::quote;
use syn::{parse_macro_input, Data, DeriveInput, Error, Fields, LitStr};

/// Derives `stratlab_columns::Columns`. A field may say its column's type where it differs
/// from its Rust type's (a column an older release wrote signed): `#[columns(stored_as =
/// "Int64")]`, any `ColumnType` variant without data.
#[proc_macro_derive(Columns, attributes(columns))]
pub fn derive_columns(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match columns(&input) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}

/// What the serde attributes of one field say about its column.
#[derive(Default)]
struct FieldSerde {
    flatten: bool,
    skip: bool,
    rename: Option<String>,
    stored_as: Option<syn::Ident>,
}

fn field_serde(field: &syn::Field) -> syn::Result<FieldSerde> {
    let mut found = FieldSerde::default();
    for attribute in field.attrs.iter().filter(|a| a.path().is_ident("serde")) {
        attribute.parse_nested_meta(|meta| {
            if meta.path.is_ident("flatten") {
                found.flatten = true;
            } else if meta.path.is_ident("skip") {
                found.skip = true;
            } else if meta.path.is_ident("rename") {
                found.rename = Some(meta.value()?.parse::<LitStr>()?.value());
            } else if meta.path.is_ident("skip_serializing") || meta.path.is_ident("skip_serializing_if") {
                return Err(meta.error("a stored row writes every column: no skip_serializing"));
            } else if meta.input.peek(syn::Token![=]) {
                // `default = "…"`, `with = "…"`, `alias = "…"`: what is written is unchanged.
                meta.value()?.parse::<proc_macro2::TokenStream>()?;
            }
            Ok(())
        })?;
    }
    for attribute in field.attrs.iter().filter(|a| a.path().is_ident("columns")) {
        attribute.parse_nested_meta(|meta| {
            if meta.path.is_ident("stored_as") {
                let name = meta.value()?.parse::<LitStr>()?;
                found.stored_as = Some(syn::Ident::new(&name.value(), name.span()));
                Ok(())
            } else {
                Err(meta.error("the columns attribute takes stored_as = \"<ColumnType>\""))
            }
        })?;
    }
    Ok(found)
}

fn columns(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    for attribute in input.attrs.iter().filter(|a| a.path().is_ident("serde")) {
        attribute.parse_nested_meta(|meta| {
            if meta.path.is_ident("rename_all") {
                return Err(meta.error("Columns names columns after the fields: no rename_all"));
            }
            if meta.input.peek(syn::Token![=]) {
                meta.value()?.parse::<proc_macro2::TokenStream>()?;
            }
            Ok(())
        })?;
    }
    let Data::Struct(data) = &input.data else {
        return Err(Error::new_spanned(&input.ident, "Columns derives for structs with named fields"));
    };
    let Fields::Named(fields) = &data.fields else {
        return Err(Error::new_spanned(&input.ident, "Columns derives for structs with named fields"));
    };
    let mut pushes = Vec::new();
    for field in &fields.named {
        let serde = field_serde(field)?;
        if serde.skip {
            continue;
        }
        let ty = &field.ty;
        if serde.flatten {
            pushes.push(quote! { columns.extend(<#ty as ::stratlab_columns::Columns>::columns()); });
            continue;
        }
        let ident = field.ident.as_ref().expect("named fields have names");
        let name = serde.rename.unwrap_or_else(|| ident.to_string().trim_start_matches("r#").to_owned());
        let column_type = match serde.stored_as {
            Some(variant) => quote! { ::stratlab_columns::ColumnType::#variant },
            None => quote! { <#ty as ::stratlab_columns::ColumnValue>::column_type() },
        };
        pushes.push(quote! {
            columns.push(::stratlab_columns::Column { name: #name, column_type: #column_type });
        });
    }
    let name = &input.ident;
    let (impl_generics, type_generics, where_clause) = input.generics.split_for_impl();
    Ok(quote! {
        impl #impl_generics ::stratlab_columns::Columns for #name #type_generics #where_clause {
            fn columns() -> ::std::vec::Vec<::stratlab_columns::Column> {
                let mut columns = ::std::vec::Vec::new();
                #(#pushes)*
                columns
            }
        }
    })
}
