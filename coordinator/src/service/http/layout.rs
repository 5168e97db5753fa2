//! The console's page frame (navigation, with Submit and Admin for the roles that may
//! use them, the signed-in account, its sign-out form) and URL text, shared by the
//! pages and the sign-in flow.

use axum::response::Html;

use crate::store::accounts::AccountRole;

/// A whole page (`templates/console/frame.html`).
#[derive(askama::Template)]
#[template(path = "console/frame.html")]
struct Frame<'a> {
    account: &'a str,
    role: AccountRole,
    csrf: &'a str,
    title: &'a str,
    /// A live page's `<main>` fingerprint: console.js replaces the `<main>` when the
    /// coordinator sends a changed one.
    live: Option<u64>,
    /// The page's `<main>` below its title, HTML.
    body: &'a str,
}

/// A whole page: the navigation, the signed-in account with its sign-out form, and `body`
/// in `<main>`. A live page (`live`: the hash of its `<main>`'s contents) has its `<main>`
/// replaced by console.js when the coordinator sends a changed one.
pub(super) fn page(
    account: &str,
    role: AccountRole,
    csrf: &str,
    title: &str,
    live: Option<u64>,
    body: &str,
) -> Html<String> {
    let frame = Frame {
        account,
        role,
        csrf,
        title,
        live,
        body,
    };
    // The frame's values are plain text and numbers: rendering cannot fail.
    Html(askama::Template::render(&frame).expect("the page frame renders") + "\n")
}

/// Every byte but RFC 3986's unreserved ones (`A–Z a–z 0–9 - . _ ~`).
const NOT_UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `s` as one path segment or query value: every byte but unreserved ones percent-encoded.
pub(super) fn url_part(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, NOT_UNRESERVED).to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_url_part_keeps_only_unreserved_bytes() {
        assert_eq!(
            super::url_part("rc66 a/b?c=d&e#f"),
            "rc66%20a%2Fb%3Fc%3Dd%26e%23f"
        );
        assert_eq!(super::url_part("Ünï-._~"), "%C3%9Cn%C3%AF-._~");
        assert_eq!(super::url_part("journal fault"), "journal%20fault");
    }
}
