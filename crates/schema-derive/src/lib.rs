//! `#[derive(Schema)]` for the engine's scenario tables (`ccarena_sim::config::schema`).
//! One declaration per field: its Rust type gives the kind, its `///` comment the
//! doc, its serde attributes whether it is required and its default, and a
//! `#[schema(...)]` attribute its allowed range and unit. From these the derive
//! writes both the table's entry in the exported schema and the check of the
//! declared ranges, so the two cannot disagree.
//!
//! Field attributes: `min = E`, `max = E` (inclusive), `gt = E`, `lt = E`
//! (exclusive), `positive` (`gt = 0`), `one_of(E, ...)`, `min_field = other`
//! (at least the value of the table's field `other`), `unit = "bytes"`,
//! `kind = "bytes"` (instead of the type's own kind), `default = E` (the
//! effective default of an optional field, for the export). Container
//! attributes: `name = "tcp"` (default: the type's name in snake_case) and
//! `rules = path` (a `fn(&Self) -> Result<(), ConfigError>` with the checks
//! across fields, run after the fields' own).
//! Structs, internally tagged enums (`#[serde(tag = "...")]`, variants in
//! snake_case) and enums of unit variants are supported. The generated code
//! names `crate::config`, so the derive is for use inside the engine crate.

use proc_macro::TokenStream;
use proc_macro2::TokenStream as Ts;
use quote::quote;
use syn::punctuated::Punctuated;
use syn::{parse_macro_input, Attribute, Data, DeriveInput, Error, Expr, Fields, Lit, LitStr, Meta, Result, Token, Type};

#[proc_macro_derive(Schema, attributes(schema))]
pub fn derive_schema(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand(&input).unwrap_or_else(Error::into_compile_error).into()
}

/// The `///` comment of an item, as one line.
fn doc(attrs: &[Attribute]) -> String {
    let mut lines = Vec::new();
    for a in attrs {
        if let Meta::NameValue(nv) = &a.meta {
            if nv.path.is_ident("doc") {
                if let Expr::Lit(l) = &nv.value {
                    if let Lit::Str(s) = &l.lit {
                        lines.push(s.value().trim().to_string());
                    }
                }
            }
        }
    }
    lines.retain(|l| !l.is_empty());
    lines.join(" ")
}

/// `GilbertElliott` -> `gilbert_elliott`, as serde's `rename_all = "snake_case"`.
fn snake_case(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Skips the value of a `key = value` or `key(...)` entry this derive does not read.
fn skip(meta: &syn::meta::ParseNestedMeta<'_>) -> Result<()> {
    if meta.input.peek(Token![=]) {
        meta.value()?.parse::<Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        meta.parse_nested_meta(|inner| skip(&inner))?;
    }
    Ok(())
}

/// What the container's serde attributes say.
#[derive(Default)]
struct SerdeContainer {
    default: bool,
    tag: Option<String>,
    snake_case: bool,
}

fn serde_container(attrs: &[Attribute]) -> Result<SerdeContainer> {
    let mut c = SerdeContainer::default();
    for a in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        a.parse_nested_meta(|meta| {
            if meta.path.is_ident("default") && !meta.input.peek(Token![=]) {
                c.default = true;
            } else if meta.path.is_ident("tag") {
                c.tag = Some(meta.value()?.parse::<LitStr>()?.value());
            } else if meta.path.is_ident("rename_all") {
                let rule = meta.value()?.parse::<LitStr>()?;
                if rule.value() != "snake_case" {
                    return Err(Error::new(rule.span(), "derive(Schema) knows rename_all = \"snake_case\" only"));
                }
                c.snake_case = true;
            } else {
                skip(&meta)?;
            }
            Ok(())
        })?;
    }
    Ok(c)
}

/// How serde fills a field that is missing.
enum SerdeDefault {
    None,
    Default,
    Path(syn::ExprPath),
}

fn serde_field_default(attrs: &[Attribute]) -> Result<SerdeDefault> {
    let mut d = SerdeDefault::None;
    for a in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        a.parse_nested_meta(|meta| {
            if meta.path.is_ident("default") {
                d = if meta.input.peek(Token![=]) {
                    SerdeDefault::Path(meta.value()?.parse::<LitStr>()?.parse()?)
                } else {
                    SerdeDefault::Default
                };
            } else if meta.path.is_ident("rename") || meta.path.is_ident("flatten") {
                return Err(meta.error("derive(Schema) does not read renamed or flattened fields"));
            } else {
                skip(&meta)?;
            }
            Ok(())
        })?;
    }
    Ok(d)
}

/// A field's `#[schema(...)]` declaration.
#[derive(Default)]
struct Decl {
    min: Option<Expr>,
    max: Option<Expr>,
    exclusive_min: bool,
    exclusive_max: bool,
    one_of: Vec<Expr>,
    min_field: Option<syn::Ident>,
    unit: Option<LitStr>,
    kind: Option<LitStr>,
    default: Option<Expr>,
}

impl Decl {
    fn parse(attrs: &[Attribute]) -> Result<Decl> {
        let mut d = Decl::default();
        for a in attrs.iter().filter(|a| a.path().is_ident("schema")) {
            a.parse_nested_meta(|meta| {
                let p = &meta.path;
                if p.is_ident("min") || p.is_ident("gt") {
                    d.exclusive_min = p.is_ident("gt");
                    d.min = Some(meta.value()?.parse()?);
                } else if p.is_ident("max") || p.is_ident("lt") {
                    d.exclusive_max = p.is_ident("lt");
                    d.max = Some(meta.value()?.parse()?);
                } else if p.is_ident("positive") {
                    d.exclusive_min = true;
                    d.min = Some(syn::parse_quote!(0));
                } else if p.is_ident("one_of") {
                    let content;
                    syn::parenthesized!(content in meta.input);
                    d.one_of = Punctuated::<Expr, Token![,]>::parse_terminated(&content)?.into_iter().collect();
                } else if p.is_ident("min_field") {
                    d.min_field = Some(meta.value()?.parse()?);
                } else if p.is_ident("unit") {
                    d.unit = Some(meta.value()?.parse()?);
                } else if p.is_ident("kind") {
                    d.kind = Some(meta.value()?.parse()?);
                } else if p.is_ident("default") {
                    d.default = Some(meta.value()?.parse()?);
                } else {
                    return Err(meta.error("unknown schema key; allowed: min, max, gt, lt, positive, one_of, min_field, unit, kind, default"));
                }
                Ok(())
            })?;
        }
        Ok(d)
    }

    fn has_range(&self) -> bool {
        self.min.is_some() || self.max.is_some() || !self.one_of.is_empty()
    }

    /// The `Range` literal: the one place the declared bounds become values.
    fn range(&self) -> Ts {
        let bound = |e: &Option<Expr>| match e {
            Some(e) => quote!(::core::option::Option::Some((#e) as f64)),
            None => quote!(::core::option::Option::None),
        };
        let (min, max) = (bound(&self.min), bound(&self.max));
        let (xmin, xmax) = (self.exclusive_min, self.exclusive_max);
        let one_of = &self.one_of;
        quote! {
            crate::config::schema::Range {
                min: #min,
                max: #max,
                exclusive_min: #xmin,
                exclusive_max: #xmax,
                one_of: &[#((#one_of) as f64),*],
            }
        }
    }

    fn unit(&self) -> Ts {
        match &self.unit {
            Some(u) => quote!(::core::option::Option::Some(#u)),
            None => quote!(::core::option::Option::None),
        }
    }
}

fn is_option(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none() && p.path.segments.last().is_some_and(|s| s.ident == "Option"))
}

/// One named field: its schema entry, its range check and its nested check.
struct FieldCode {
    schema: Ts,
    check: Ts,
}

/// `access(field)` is an expression of type `&FieldType` for a field of the
/// table (of `self`, or a binding of a variant's field); `container_default`
/// the expression of the container's default value, when serde fills missing
/// fields from it.
fn field_code(f: &syn::Field, access: &dyn Fn(&syn::Ident) -> Ts, container_default: Option<Ts>) -> Result<FieldCode> {
    let ident = f.ident.as_ref().expect("named field");
    let value = access(ident);
    let name = ident.to_string();
    let ty = &f.ty;
    let decl = Decl::parse(&f.attrs)?;
    let doc = doc(&f.attrs);
    if doc.is_empty() {
        return Err(Error::new_spanned(ident, "a schema field needs a /// doc comment (it is exported)"));
    }
    let schema = quote!(crate::config::schema);
    let json = |e: Ts| quote!(#schema::to_json(&#e));
    let (required, default) = match (&decl.default, serde_field_default(&f.attrs)?, container_default) {
        (Some(e), _, _) => (false, json(quote!((#e)))),
        (None, SerdeDefault::Path(p), _) => (false, json(quote!(#p()))),
        (None, SerdeDefault::Default, _) => (false, json(quote!(<#ty as ::core::default::Default>::default()))),
        (None, SerdeDefault::None, Some(c)) => (false, json(quote!(#c.#ident))),
        (None, SerdeDefault::None, None) if is_option(ty) => (false, quote!(#schema::Json::Null)),
        (None, SerdeDefault::None, None) => (true, quote!(#schema::Json::Null)),
    };
    let kind = match &decl.kind {
        Some(k) => quote!(.with_kind(#k)),
        None => quote!(),
    };
    let range = decl.range();
    let unit = decl.unit();
    let (min_field, min_field_check) = match &decl.min_field {
        Some(other) => {
            let other_name = other.to_string();
            let other_value = access(other);
            (
                quote!(::core::option::Option::Some(#other_name)),
                quote!(#schema::check_min_field(#value, #other_value, #other_name, #unit, #name)?;),
            )
        }
        None => (quote!(::core::option::Option::None), quote!()),
    };
    let field_schema = quote! {
        #schema::FieldSchema {
            name: #name,
            ty: <#ty as #schema::FieldType>::describe() #kind,
            required: #required,
            default: #default,
            range: #range,
            min_field: #min_field,
            unit: #unit,
            doc: #doc,
        }
    };
    let range_check = if decl.has_range() {
        quote!(#schema::check_range(#value, &#range, #unit, #name)?;)
    } else {
        quote!()
    };
    let check = quote! {
        #range_check
        #min_field_check
        #schema::FieldType::check_nested(#value).map_err(|e| e.within(#name))?;
    };
    Ok(FieldCode { schema: field_schema, check })
}

fn expand(input: &DeriveInput) -> Result<Ts> {
    let ident = &input.ident;
    let serde = serde_container(&input.attrs)?;
    let mut name = snake_case(&ident.to_string());
    let mut rules = quote!();
    for a in input.attrs.iter().filter(|a| a.path().is_ident("schema")) {
        a.parse_nested_meta(|meta| {
            if meta.path.is_ident("name") {
                name = meta.value()?.parse::<LitStr>()?.value();
                Ok(())
            } else if meta.path.is_ident("rules") {
                let path: syn::ExprPath = meta.value()?.parse()?;
                rules = quote!(#path(self)?;);
                Ok(())
            } else {
                Err(meta.error("unknown schema key on a type; allowed: name, rules"))
            }
        })?;
    }
    let table_doc = doc(&input.attrs);
    let schema = quote!(crate::config::schema);
    let (table, check, describe, collect) = match &input.data {
        Data::Struct(s) => {
            let Fields::Named(fields) = &s.fields else {
                return Err(Error::new_spanned(ident, "derive(Schema) needs named fields"));
            };
            let container_default = serde.default.then(|| quote!(<Self as ::core::default::Default>::default()));
            let mut schemas = Vec::new();
            let mut checks = Vec::new();
            let mut types = Vec::new();
            for f in &fields.named {
                let code = field_code(f, &|id| quote!(&self.#id), container_default.clone())?;
                schemas.push(code.schema);
                checks.push(code.check);
                types.push(&f.ty);
            }
            (
                quote!(#schema::Table::fields(#table_doc, vec![#(#schemas),*])),
                quote!(#(#checks)* #rules Ok(())),
                quote!(#schema::TypeInfo::table(#name)),
                quote!(#(<#types as #schema::FieldType>::collect(tables);)*),
            )
        }
        Data::Enum(e) if e.variants.iter().all(|v| matches!(v.fields, Fields::Unit)) && serde.tag.is_none() => {
            if !serde.snake_case {
                return Err(Error::new_spanned(ident, "derive(Schema) needs rename_all = \"snake_case\" on an enum"));
            }
            let values: Vec<String> = e.variants.iter().map(|v| snake_case(&v.ident.to_string())).collect();
            let docs: Vec<String> = e.variants.iter().map(|v| doc(&v.attrs)).collect();
            (
                quote!(#schema::Table::values(#table_doc, vec![#((#values, #docs)),*])),
                quote!(Ok(())),
                quote!(#schema::TypeInfo::values(#name, &[#(#values),*])),
                quote!(),
            )
        }
        Data::Enum(e) => {
            let Some(tag) = &serde.tag else {
                return Err(Error::new_spanned(ident, "derive(Schema) needs an internally tagged enum (#[serde(tag = \"...\")])"));
            };
            if !serde.snake_case {
                return Err(Error::new_spanned(ident, "derive(Schema) needs rename_all = \"snake_case\" on an enum"));
            }
            let mut variants = Vec::new();
            let mut arms = Vec::new();
            let mut collect = Vec::new();
            for v in &e.variants {
                let vid = &v.ident;
                let vname = snake_case(&vid.to_string());
                let vdoc = doc(&v.attrs);
                match &v.fields {
                    Fields::Unit => {
                        variants.push(quote!(#schema::Variant { name: #vname, doc: #vdoc.to_string(), fields: vec![] }));
                        arms.push(quote!(Self::#vid => {}));
                    }
                    Fields::Unnamed(u) if u.unnamed.len() == 1 => {
                        // A variant holding one table: its fields are the variant's.
                        let inner = &u.unnamed[0].ty;
                        variants.push(quote! {
                            #schema::Variant { name: #vname, doc: #vdoc.to_string(), fields: <#inner as #schema::Schema>::table().fields }
                        });
                        arms.push(quote!(Self::#vid(inner) => #schema::Schema::check_fields(inner)?,));
                        collect.push(quote!(<#inner as #schema::Schema>::collect_fields(tables);));
                    }
                    Fields::Named(n) => {
                        let mut schemas = Vec::new();
                        let mut checks = Vec::new();
                        let mut binds = Vec::new();
                        for f in &n.named {
                            let id = f.ident.as_ref().expect("named");
                            let code = field_code(f, &|id| quote!(#id), None)?;
                            schemas.push(code.schema);
                            checks.push(code.check);
                            binds.push(id.clone());
                            let ty = &f.ty;
                            collect.push(quote!(<#ty as #schema::FieldType>::collect(tables);));
                        }
                        variants.push(quote!(#schema::Variant { name: #vname, doc: #vdoc.to_string(), fields: vec![#(#schemas),*] }));
                        arms.push(quote!(Self::#vid { #(#binds),* } => { #(#checks)* }));
                    }
                    Fields::Unnamed(_) => return Err(Error::new_spanned(vid, "derive(Schema): a tuple variant holds one table")),
                }
            }
            (
                quote!(#schema::Table::variants(#table_doc, #tag, vec![#(#variants),*])),
                quote!(match self { #(#arms)* } #rules Ok(())),
                quote!(#schema::TypeInfo::table(#name)),
                quote!(#(#collect)*),
            )
        }
        Data::Union(_) => return Err(Error::new_spanned(ident, "derive(Schema) does not take unions")),
    };
    Ok(quote! {
        impl #schema::Schema for #ident {
            const NAME: &'static str = #name;

            fn table() -> #schema::Table {
                #table
            }

            fn check_fields(&self) -> ::core::result::Result<(), crate::config::ConfigError> {
                #check
            }

            fn collect_fields(tables: &mut #schema::Tables) {
                #collect
            }
        }

        impl #schema::FieldType for #ident {
            fn describe() -> #schema::TypeInfo {
                #describe
            }

            fn collect(tables: &mut #schema::Tables) {
                if tables.add(<Self as #schema::Schema>::NAME, <Self as #schema::Schema>::table) {
                    <Self as #schema::Schema>::collect_fields(tables);
                }
            }

            fn check_nested(&self) -> ::core::result::Result<(), crate::config::ConfigError> {
                #schema::Schema::check_fields(self)
            }
        }
    })
}
