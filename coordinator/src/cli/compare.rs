//! `platter compare A B`: each cell of B against its counterpart in A.

use super::*;

pub(super) async fn compare(a: CompareArgs) -> anyhow::Result<i32> {
    let CompareArgs {
        a,
        b,
        db,
        client,
        metric,
        format,
        allow_unmatched,
    } = a;
    let compared = match local_store(db, &client)? {
        Some(db) => {
            use crate::report::judge::{check_side_host, compare_sides, split_side};
            let store = open_local(&db)?;
            let ((a_ref, a_host), (b_ref, b_host)) = (split_side(&a), split_side(&b));
            let (ra, rb) = (
                crate::report::Report::load(&store, a_ref)?,
                crate::report::Report::load(&store, b_ref)?,
            );
            check_side_host(&ra, a_host).map_err(anyhow::Error::msg)?;
            check_side_host(&rb, b_host).map_err(anyhow::Error::msg)?;
            compare_sides((&ra, a_host), (&rb, b_host), &metric)
        }
        None => {
            let resp = client
                .connect()
                .await?
                .compare(pb::CompareRequest {
                    a: a.clone(),
                    b: b.clone(),
                    metric: metric.clone(),
                })
                .await
                .map_err(|s| call_error("compare", s))?
                .into_inner();
            crate::service::rpc::control::comparison_from_pb(resp, &a, &b, &metric)
        }
    };
    if format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&compared)?);
    } else {
        print!("{}", render_comparison(&compared));
    }
    if !compared.rows.iter().any(|r| r.compared) {
        bail!("no cell of {b} has a counterpart with the same host and parameters in {a} that measured {metric}");
    }
    let incomplete = compared.incomplete();
    if incomplete > 0 && !allow_unmatched {
        eprintln!(
            "platter: {incomplete} cell(s) could not be compared (listed above); \
             --allow-unmatched exits 0 anyway"
        );
        return Ok(EXIT_UNMATCHED);
    }
    Ok(0)
}
