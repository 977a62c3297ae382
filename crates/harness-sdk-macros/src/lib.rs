//! The attributes of `harness-sdk`, which re-exports them: `#[tool]` makes a tool of a plain
//! function, `#[schema]` derives what an argument or result type needs.
//!
//! The generated code names serde, schemars and serde_json through `::harness_sdk`, so that a
//! plugin needs no dependency of its own on them and no `crate = ...` attributes. A plugin that
//! renames its `harness-sdk` dependency cannot use these attributes.
#![forbid(unsafe_code)]

mod docs;

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote};
use syn::parse::ParseStream;
use syn::spanned::Spanned;
use syn::{Attribute, FnArg, Ident, ItemFn, LitStr, Pat, ReturnType, Type};

/// Makes a tool of a plain function: `#[harness_sdk::tool(effects = "pure")]`.
///
/// Generates, beside the function, a module of the same name holding the arguments struct
/// (one field per parameter, `deny_unknown_fields`) and `tool()`, which `harness_sdk::plugin!`
/// lists. The doc comment is the tool's description; a `# Arguments` section of bullets
/// (`` * `name` - what it is ``) documents the parameters in the schema. Attribute arguments:
/// `effects` (required: pure, reads, writes, network), `name` (default: the function's), and
/// any number of `example(args = {...}, result = ...)` or `example(args = {...}, error = "code")`.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut options = ToolOptions::default();
    let parser = syn::meta::parser(|meta| options.parse(meta));
    syn::parse_macro_input!(attr with parser);
    let func = syn::parse_macro_input!(item as ItemFn);
    expand_tool(options, func).unwrap_or_else(syn::Error::into_compile_error).into()
}

/// Derives `Serialize`, `Deserialize` and `JsonSchema` through the SDK's re-exports.
///
/// For the types a tool takes or returns; put it above any `#[serde(...)]` attribute.
#[proc_macro_attribute]
pub fn schema(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        let error = syn::Error::new(Span::call_site(), "#[harness_sdk::schema] takes no arguments");
        return error.into_compile_error().into();
    }
    let item = TokenStream2::from(item);
    quote! {
        #[derive(::harness_sdk::serde::Serialize, ::harness_sdk::serde::Deserialize, ::harness_sdk::schemars::JsonSchema)]
        #[serde(crate = "::harness_sdk::serde")]
        #[schemars(crate = "::harness_sdk::schemars")]
        #item
    }
    .into()
}

/// One `example(...)`: the arguments, and the result or the error code expected.
struct Example {
    args: TokenStream2,
    outcome: Outcome,
}

enum Outcome {
    Result(TokenStream2),
    Error(LitStr),
}

/// The arguments of `#[tool(...)]`.
#[derive(Default)]
struct ToolOptions {
    effects: Option<Ident>,
    name: Option<LitStr>,
    examples: Vec<Example>,
}

const EFFECTS: &[(&str, &str)] = &[("pure", "Pure"), ("reads", "Reads"), ("writes", "Writes"), ("network", "Network")];

impl ToolOptions {
    fn parse(&mut self, meta: syn::meta::ParseNestedMeta<'_>) -> syn::Result<()> {
        if meta.path.is_ident("effects") {
            let value: LitStr = meta.value()?.parse()?;
            let variant = EFFECTS.iter().find(|(name, _)| *name == value.value()).ok_or_else(|| {
                syn::Error::new(value.span(), "effects must be one of \"pure\", \"reads\", \"writes\", \"network\"")
            })?;
            self.effects = Some(Ident::new(variant.1, value.span()));
        } else if meta.path.is_ident("name") {
            self.name = Some(meta.value()?.parse()?);
        } else if meta.path.is_ident("example") {
            self.examples.push(parse_example(&meta)?);
        } else {
            return Err(
                meta.error("unknown #[tool] argument; expected effects = \"...\", name = \"...\" or example(...)")
            );
        }
        Ok(())
    }
}

/// `example(args = JSON, result = JSON)` or `example(args = JSON, error = "code")`, where JSON is
/// anything `serde_json::json!` takes.
fn parse_example(meta: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<Example> {
    let (mut args, mut result, mut error) = (None, None, None);
    meta.parse_nested_meta(|inner| {
        if inner.path.is_ident("args") {
            args = Some(json_tokens(inner.value()?)?);
        } else if inner.path.is_ident("result") {
            result = Some(json_tokens(inner.value()?)?);
        } else if inner.path.is_ident("error") {
            error = Some(inner.value()?.parse::<LitStr>()?);
        } else {
            return Err(inner.error("unknown example argument; expected args, result or error"));
        }
        Ok(())
    })?;
    let args = args.ok_or_else(|| meta.error("an example needs args = {...}"))?;
    let outcome = match (result, error) {
        (Some(result), None) => Outcome::Result(result),
        (None, Some(code)) => Outcome::Error(code),
        _ => return Err(meta.error("an example needs exactly one of result = ... or error = \"code\"")),
    };
    Ok(Example { args, outcome })
}

/// The tokens up to the next top-level comma: one `json!` input.
fn json_tokens(input: ParseStream<'_>) -> syn::Result<TokenStream2> {
    let mut tokens = TokenStream2::new();
    while !input.is_empty() && !input.peek(syn::Token![,]) {
        tokens.extend([input.parse::<proc_macro2::TokenTree>()?]);
    }
    if tokens.is_empty() {
        return Err(input.error("expected a JSON value"));
    }
    Ok(tokens)
}

/// One parameter of the function, as a field of the arguments struct.
struct Field {
    ident: Ident,
    ty: Type,
    attrs: Vec<Attribute>,
}

/// Takes the parameters out of the signature, leaving their `serde`/`schemars` attributes
/// (which belong to the arguments struct) off the function.
fn fields(func: &mut ItemFn) -> syn::Result<Vec<Field>> {
    let mut fields = Vec::new();
    for input in &mut func.sig.inputs {
        let FnArg::Typed(param) = input else {
            return Err(syn::Error::new(input.span(), "a tool is a plain function: no self parameter"));
        };
        let Pat::Ident(pat) = param.pat.as_ref() else {
            return Err(syn::Error::new(param.pat.span(), "a tool's parameters must be plain names: each is a field"));
        };
        if let Type::Reference(r) = param.ty.as_ref() {
            return Err(syn::Error::new(r.span(), "a tool's parameters are owned values (String, not &str)"));
        }
        let (moved, kept) =
            param.attrs.drain(..).partition(|a| a.path().is_ident("serde") || a.path().is_ident("schemars"));
        param.attrs = kept;
        fields.push(Field { ident: pat.ident.clone(), ty: (*param.ty).clone(), attrs: moved });
    }
    Ok(fields)
}

/// The result type the output schema is generated from, and whether the function returns a
/// `Result` (whose error converts into a `ToolError`).
fn output(sig: &syn::Signature) -> (Option<Type>, bool) {
    let ReturnType::Type(_, ty) = &sig.output else { return (None, false) };
    if let Type::Path(path) = ty.as_ref()
        && let Some(last) = path.path.segments.last()
        && last.ident == "Result"
        && let syn::PathArguments::AngleBracketed(args) = &last.arguments
        && let Some(syn::GenericArgument::Type(ok)) = args.args.first()
    {
        return (Some(ok.clone()), true);
    }
    (Some((**ty).clone()), false)
}

fn check_signature(sig: &syn::Signature) -> syn::Result<()> {
    let refuse = |span: Span, what: &str| Err(syn::Error::new(span, what));
    if let Some(a) = &sig.asyncness {
        return refuse(a.span(), "a tool is a synchronous function (the host calls it on a worker thread)");
    }
    if !sig.generics.params.is_empty() {
        return refuse(
            sig.generics.span(),
            "a tool function cannot be generic: its schema is generated from its types",
        );
    }
    if let ReturnType::Type(_, ty) = &sig.output
        && matches!(ty.as_ref(), Type::ImplTrait(_))
    {
        return refuse(ty.span(), "a tool returns a named type (its output schema is generated from it)");
    }
    Ok(())
}

fn expand_tool(options: ToolOptions, mut func: ItemFn) -> syn::Result<TokenStream2> {
    check_signature(&func.sig)?;
    let effects = options.effects.clone().ok_or_else(|| {
        syn::Error::new(
            func.sig.ident.span(),
            "#[tool] needs its effects: effects = \"pure\", \"reads\", \"writes\" or \"network\"",
        )
    })?;
    let docs = docs::split(&func.attrs);
    if docs.description.is_empty() {
        let message = "a tool needs a doc comment: its first paragraphs are the description the model reads";
        return Err(syn::Error::new(func.sig.ident.span(), message));
    }
    let fields = fields(&mut func)?;
    if let Some(unknown) = docs.params.keys().find(|name| !fields.iter().any(|f| f.ident == name)) {
        let message = format!("the doc comment's # Arguments names `{unknown}`, which is not a parameter");
        return Err(syn::Error::new(func.sig.ident.span(), message));
    }
    let ident = func.sig.ident.clone();
    let vis = func.vis.clone();
    let name = options.name.clone().unwrap_or_else(|| LitStr::new(&ident.unraw_string(), ident.span()));
    let args_struct = format_ident!("{}Args", camel(&ident.unraw_string()));
    let field_defs = fields.iter().map(|f| {
        let (ident, ty, attrs) = (&f.ident, &f.ty, &f.attrs);
        let doc = docs.params.get(&ident.unraw_string()).map(|d| quote!(#[doc = #d]));
        quote!(#doc #(#attrs)* pub #ident: #ty)
    });
    let field_names: Vec<&Ident> = fields.iter().map(|f| &f.ident).collect();
    let (output_type, returns_result) = output(&func.sig);
    let call = quote!(super::#ident(#(args.#field_names),*));
    let body = if returns_result {
        quote!(#call.map_err(::core::convert::Into::into))
    } else {
        quote!(::core::result::Result::Ok(#call))
    };
    let output = output_type.map(|ty| quote!(.output::<#ty>()));
    let examples = options.examples.iter().map(example_call);
    let description = LitStr::new(&docs.description, Span::call_site());
    Ok(quote! {
        #func

        #[doc(hidden)]
        #[allow(non_snake_case, unreachable_pub, private_interfaces, missing_docs)]
        #vis mod #ident {
            #[allow(unused_imports)]
            use super::*;

            #[derive(::harness_sdk::serde::Deserialize, ::harness_sdk::schemars::JsonSchema)]
            #[serde(crate = "::harness_sdk::serde", deny_unknown_fields)]
            #[schemars(crate = "::harness_sdk::schemars")]
            pub struct #args_struct {
                #(#field_defs,)*
            }

            pub fn tool<__HarnessP: 'static>() -> ::harness_sdk::Tool<__HarnessP> {
                ::harness_sdk::Tool::new(#name, #description, ::harness_sdk::Effects::#effects,
                    |_: &__HarnessP, args: #args_struct| #body)
                #output
                #(#examples)*
            }
        }
    })
}

fn example_call(example: &Example) -> TokenStream2 {
    let args = &example.args;
    match &example.outcome {
        Outcome::Result(result) => {
            quote!(.example(::harness_sdk::serde_json::json!(#args), ::harness_sdk::serde_json::json!(#result)))
        }
        Outcome::Error(code) => quote!(.example_error(::harness_sdk::serde_json::json!(#args), #code)),
    }
}

/// `word_count` becomes `WordCount`.
fn camel(name: &str) -> String {
    name.split('_')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
        })
        .collect()
}

/// `Ident::to_string` without the `r#` of a raw identifier.
trait Unraw {
    fn unraw_string(&self) -> String;
}

impl Unraw for Ident {
    fn unraw_string(&self) -> String {
        let text = self.to_string();
        text.strip_prefix("r#").map(str::to_owned).unwrap_or(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(options: ToolOptions, func: ItemFn) -> String {
        expand_tool(options, func).err().map(|e| e.to_string()).unwrap_or_default()
    }

    fn pure() -> ToolOptions {
        ToolOptions { effects: Some(Ident::new("Pure", Span::call_site())), ..ToolOptions::default() }
    }

    #[test]
    fn mistakes_are_named_at_build_time() {
        let documented: ItemFn = syn::parse_quote!(
            #[doc = " Greets."]
            fn greet(name: String) -> String {
                name
            }
        );
        assert!(error_of(ToolOptions::default(), documented.clone()).contains("needs its effects"));
        assert!(expand_tool(pure(), documented).is_ok());
        let undocumented: ItemFn = syn::parse_quote!(
            fn greet(name: String) -> String {
                name
            }
        );
        assert!(error_of(pure(), undocumented).contains("needs a doc comment"));
        let borrowed: ItemFn = syn::parse_quote!(
            #[doc = " Greets."]
            fn greet(name: &str) -> String {
                name.into()
            }
        );
        assert!(error_of(pure(), borrowed).contains("owned values"));
        let stray: ItemFn = syn::parse_quote!(
            #[doc = " Greets.\n # Arguments\n * `nom` - x"]
            fn greet(name: String) {}
        );
        assert!(error_of(pure(), stray).contains("`nom`"));
        let asynchronous: ItemFn = syn::parse_quote!(
            #[doc = " Greets."]
            async fn greet(name: String) {}
        );
        assert!(error_of(pure(), asynchronous).contains("synchronous"));
    }

    #[test]
    fn camel_case() {
        assert_eq!(camel("greet"), "Greet");
        assert_eq!(camel("word_count__2"), "WordCount2");
    }

    #[test]
    fn result_types_are_unwrapped_for_the_output_schema() {
        let sig: syn::Signature = syn::parse_quote!(fn f(a: u8) -> Result<Greeting, ToolError>);
        let (ty, result) = output(&sig);
        assert!(result);
        assert_eq!(quote!(#ty).to_string(), "Greeting");
        let sig: syn::Signature = syn::parse_quote!(fn f() -> String);
        assert!(!output(&sig).1);
        let sig: syn::Signature = syn::parse_quote!(fn f());
        assert!(output(&sig).0.is_none());
    }
}
