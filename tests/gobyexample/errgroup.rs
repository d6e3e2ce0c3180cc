//! golang.org/x/sync/errgroup's examples: `Group` (parallel), the "Google Search
//! 2.0" function with a context and error handling, and `JustErrors`, whose HTTP
//! fetches are simulated (the third URL does not resolve).

use crate::out::Out;
use goro::context::{self, Context};
use goro::sync::{ErrGroup, Mutex};
use std::sync::Arc;

type Result = String;
type Search = fn(&Context, &str) -> std::result::Result<Result, String>;

fn fake_search(kind: &str, query: &str) -> std::result::Result<Result, String> {
    Ok(format!("{kind} result for {query:?}"))
}

fn web(_: &Context, query: &str) -> std::result::Result<Result, String> {
    fake_search("web", query)
}

fn image(_: &Context, query: &str) -> std::result::Result<Result, String> {
    fake_search("image", query)
}

fn video(_: &Context, query: &str) -> std::result::Result<Result, String> {
    fake_search("video", query)
}

fn google(ctx: &Context, query: &str) -> std::result::Result<Vec<Result>, String> {
    let (g, ctx) = ErrGroup::<String>::with_context(ctx);

    let searches: [Search; 3] = [web, image, video];
    let results = Arc::new(Mutex::new(vec![Result::new(); searches.len()]));
    for (i, search) in searches.into_iter().enumerate() {
        let (ctx, results, query) = (ctx.clone(), results.clone(), query.to_string());
        g.go(move || {
            let result = search(&ctx, &query)?;
            results.lock()[i] = result;
            Ok(())
        });
    }
    g.wait()?;
    let results = std::mem::take(&mut *results.lock());
    Ok(results)
}

pub fn main(out: &Out) {
    let results = match google(&context::background(), "golang") {
        Ok(r) => r,
        Err(err) => {
            eprintln!("{err}");
            return;
        }
    };
    for result in results {
        out.println(result);
    }
}

/// `http.Get`, simulated: a name that does not resolve fails.
fn http_get(url: &str) -> std::result::Result<(), String> {
    goro::time::sleep(std::time::Duration::from_millis(5));
    if url.contains("somestupidname") {
        return Err(format!(
            "Get \"{url}\": dial tcp: lookup www.somestupidname.com: no such host"
        ));
    }
    Ok(())
}

pub fn main_just_errors(out: &Out) {
    let g = ErrGroup::<String>::new();
    let urls = [
        "http://www.golang.org/",
        "http://www.google.com/",
        "http://www.somestupidname.com/",
    ];
    for url in urls {
        g.go(move || http_get(url));
    }
    if g.wait().is_ok() {
        out.println("Successfully fetched all URLs.");
    }
}
