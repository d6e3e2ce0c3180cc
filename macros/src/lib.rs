//! goro-macros: `#[goro::main]`. Used through goro-rt, which re-exports it.
//!
//! Written on `proc_macro` alone (no `syn`, no `quote`): the attribute only needs the
//! item's last token tree (the body) and the tokens after `->` (the return type), and
//! a dependency-free crate builds in about a second.

use proc_macro::{Delimiter, Group, Ident, Punct, Spacing, Span, TokenStream, TokenTree};

/// Runs `fn main`'s body as a coroutine named `"main"` (Go's main goroutine): it
/// appears in `goro::debug::coroutines()`, in `debug::dump()`, the SIGQUIT dump and
/// the deadlock report with its stack, as Go's main goroutine does; the program ends
/// when it returns, whatever other coroutines still run. `fn main() -> Result<(), E>`
/// works as without the attribute (an `Err` is printed with `Debug` and the exit
/// status is 1); a panic in main ends the program as a panicking main does.
///
/// ```ignore
/// #[goro::main]
/// fn main() {
///     let h = goro::go!(|| 6 * 7);
///     assert_eq!(h.join().unwrap(), 42);
/// }
/// ```
#[proc_macro_attribute]
pub fn main(attr: TokenStream, item: TokenStream) -> TokenStream {
    if let Some(t) = attr.into_iter().next() {
        return error(t.span(), "#[goro::main] takes no arguments");
    }
    let tokens: Vec<TokenTree> = item.into_iter().collect();
    // `fn main`, not async.
    let fn_at = tokens
        .iter()
        .position(|t| matches!(t, TokenTree::Ident(i) if i.to_string() == "fn"));
    let Some(fn_at) = fn_at else {
        return error(Span::call_site(), "#[goro::main] goes on `fn main`");
    };
    match tokens.get(fn_at + 1) {
        Some(TokenTree::Ident(name)) if name.to_string() == "main" => {}
        Some(t) => return error(t.span(), "#[goro::main] goes on `fn main`"),
        None => return error(Span::call_site(), "#[goro::main] goes on `fn main`"),
    }
    if let Some(a) = tokens[..fn_at]
        .iter()
        .find(|t| matches!(t, TokenTree::Ident(i) if i.to_string() == "async"))
    {
        return error(
            a.span(),
            "#[goro::main] runs a blocking main on a coroutine: drop `async` (for async \
             code, call goro::tokio::block_on or goro::block_on inside)",
        );
    }
    let Some(TokenTree::Group(body)) = tokens.last() else {
        return error(Span::call_site(), "#[goro::main]: `fn main` has no body");
    };
    if body.delimiter() != Delimiter::Brace {
        return error(body.span(), "#[goro::main]: `fn main` has no body");
    }
    let sig = &tokens[..tokens.len() - 1];
    // The return type: what follows `->` after the parameter list.
    let params_at = sig
        .iter()
        .position(|t| matches!(t, TokenTree::Group(g) if g.delimiter() == Delimiter::Parenthesis));
    let Some(params_at) = params_at else {
        return error(
            Span::call_site(),
            "#[goro::main]: `fn main` has no parameter list",
        );
    };
    if let TokenTree::Group(params) = &sig[params_at] {
        if !params.stream().is_empty() {
            return error(
                params.span(),
                "#[goro::main]: `fn main` takes no parameters",
            );
        }
    }
    let after = &sig[params_at + 1..];
    let ret: Vec<TokenTree> = match after {
        [TokenTree::Punct(a), TokenTree::Punct(b), rest @ ..]
            if a.as_char() == '-' && b.as_char() == '>' =>
        {
            rest.to_vec()
        }
        [] => Vec::new(),
        [t, ..] => {
            return error(
                t.span(),
                "#[goro::main]: expected `fn main()` or `fn main() -> T`",
            )
        }
    };
    // fn main() -> ::std::process::ExitCode {
    //     ::goro::__main(move || -> RET { BODY })
    // }
    let mut out: Vec<TokenTree> = sig[..=params_at].to_vec();
    out.extend(path(&["std", "process", "ExitCode"], true));
    let mut closure: Vec<TokenTree> = vec![
        TokenTree::Ident(Ident::new("move", Span::call_site())),
        TokenTree::Punct(Punct::new('|', Spacing::Joint)),
        TokenTree::Punct(Punct::new('|', Spacing::Alone)),
    ];
    if !ret.is_empty() {
        closure.push(TokenTree::Punct(Punct::new('-', Spacing::Joint)));
        closure.push(TokenTree::Punct(Punct::new('>', Spacing::Alone)));
        closure.extend(ret);
    }
    closure.push(TokenTree::Group(body.clone()));
    let mut call: Vec<TokenTree> = path(&["goro", "__main"], false);
    call.push(TokenTree::Group(Group::new(
        Delimiter::Parenthesis,
        closure.into_iter().collect(),
    )));
    let mut new_body = Group::new(Delimiter::Brace, call.into_iter().collect());
    new_body.set_span(body.span());
    out.push(TokenTree::Group(new_body));
    out.into_iter().collect()
}

/// `-> ::a::b::c` (with `arrow`) or `::a::b::c`.
fn path(segments: &[&str], arrow: bool) -> Vec<TokenTree> {
    let mut out = Vec::new();
    if arrow {
        out.push(TokenTree::Punct(Punct::new('-', Spacing::Joint)));
        out.push(TokenTree::Punct(Punct::new('>', Spacing::Alone)));
    }
    for s in segments {
        out.push(TokenTree::Punct(Punct::new(':', Spacing::Joint)));
        out.push(TokenTree::Punct(Punct::new(':', Spacing::Alone)));
        out.push(TokenTree::Ident(Ident::new(s, Span::call_site())));
    }
    out
}

/// `compile_error!("msg")` at `span`.
fn error(span: Span, msg: &str) -> TokenStream {
    let mut lit = proc_macro::Literal::string(msg);
    lit.set_span(span);
    let mut args = Group::new(
        Delimiter::Parenthesis,
        std::iter::once(TokenTree::Literal(lit)).collect(),
    );
    args.set_span(span);
    let mut bang = Punct::new('!', Spacing::Alone);
    bang.set_span(span);
    [
        TokenTree::Ident(Ident::new("compile_error", span)),
        TokenTree::Punct(bang),
        TokenTree::Group(args),
        TokenTree::Punct(Punct::new(';', Spacing::Alone)),
    ]
    .into_iter()
    .collect()
}
