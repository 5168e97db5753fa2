//! The console's page frame (navigation, with Submit and Admin for the roles that may
//! use them, the signed-in account, its sign-out form) and URL text, shared by the
//! pages and the sign-in flow.

use axum::response::Html;

use crate::report::esc;
use crate::store::accounts::AccountRole;

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
    let submit = if role.allows(AccountRole::Operator) {
        r#"<a href="/submit">Submit</a>"#
    } else {
        ""
    };
    let admin = if role.allows(AccountRole::Admin) {
        r#"<a href="/admin">Admin</a>"#
    } else {
        ""
    };
    Html(format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{title} · platter</title><link rel="stylesheet" href="/assets/console.css"><script src="/assets/console.js" defer></script></head>
<body><header><nav><strong>platter</strong> <a href="/">Overview</a> <a href="/hosts">Hosts</a> <a href="/campaigns">Campaigns</a> <a href="/compare">Compare</a> <a href="/drives">Drives</a> {submit} {admin}</nav>
<form method="post" action="/logout" class="who"><span id="account">{account} ({role})</span><input type="hidden" name="csrf" value="{csrf}"><button type="submit">Sign out</button></form></header>
<main id="main"{live}>
<h1>{title}</h1>
{body}</main></body></html>
"#,
        title = esc(title),
        account = esc(account),
        role = role.as_str(),
        csrf = esc(csrf),
        live = match live {
            Some(seen) => format!(r#" data-live="/events" data-seen="{seen}""#),
            None => String::new(),
        },
    ))
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
