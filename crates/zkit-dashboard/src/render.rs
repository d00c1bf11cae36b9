//! Server-side HTML: the pages' shells and the live sections, rendered from a [`Snapshot`].
//! The same functions render the first page load (readable without JavaScript) and the
//! fragments the event stream sends, so the page and its updates never disagree. Everything
//! from the server (paths, data, addresses) is escaped.

use std::fmt::Write as _;

use serde_json::json;

use crate::model::{Snapshot, TxnTree};
use crate::recipes::Contender;

/// Escapes text for HTML content and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A session id as ZooKeeper prints it.
pub fn sid(id: i64) -> String {
    format!("{:#x}", id as u64)
}

/// Percent-encodes a path for a query string.
pub fn url_path(path: &str) -> String {
    let mut out = String::new();
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    /// `/`.
    Home,
    /// `/tree`.
    Tree,
    /// `/watches`.
    Watches,
    /// `/charts`.
    Charts,
}

/// A whole page around `body`.
pub fn page(page: Page, server: &str, body: &str) -> String {
    let nav = [
        (Page::Home, "/", "Home"),
        (Page::Tree, "/tree", "Tree"),
        (Page::Watches, "/watches", "Watches"),
        (Page::Charts, "/charts", "Charts"),
    ]
    .iter()
    .map(|(p, href, label)| {
        let class = if *p == page { " class=\"active\"" } else { "" };
        format!("<a href=\"{href}\"{class}>{label}</a>")
    })
    .collect::<Vec<_>>()
    .join("");
    let title = match page {
        Page::Home => "Home",
        Page::Tree => "Tree",
        Page::Watches => "Watches",
        Page::Charts => "Charts",
    };
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>zkit dashboard · {title}</title>\
         <link rel=\"stylesheet\" href=\"/assets/dashboard.css\"></head>\
         <body data-page=\"{page:?}\"><header><span class=\"brand\">zkit dashboard</span>\
         <span class=\"server\">{server}</span><nav>{nav}</nav>\
         <span id=\"live\" class=\"live\" title=\"live updates\">static</span>\
         <span id=\"me\" class=\"me\"></span></header>\
         <main>{body}</main>\
         <script src=\"/assets/dashboard.js\"></script></body></html>\n",
        server = esc(server),
    )
}

/// The home page's body.
pub fn home(s: &Snapshot) -> String {
    format!(
        "<section id=\"sec-status\" data-section=\"status\">{}</section>\
         <div class=\"cols\"><section id=\"sec-root\" data-section=\"root\">{}</section>\
         <section id=\"sec-sessions\" data-section=\"sessions\">{}</section></div>\
         <section id=\"sec-recipes\" data-section=\"recipes\">{}</section>",
        status(s),
        root(s),
        sessions(s),
        recipes(s)
    )
}

/// The watches page's body.
pub fn watches_page(s: &Snapshot) -> String {
    format!(
        "<section id=\"sec-watches\" data-section=\"watches\">{}</section>",
        watches(s)
    )
}

/// The tree page's body: the browser (driven by the script) and a no-script root listing.
pub fn tree_page(s: &Snapshot, path: &str) -> String {
    format!(
        "<div class=\"cols tree-cols\"><section class=\"tree-pane\"><h2>Tree</h2>\
         <div id=\"tree\" data-start=\"{start}\"><noscript>{root}</noscript></div></section>\
         <section class=\"node-pane\"><div id=\"node\"><p class=\"muted\">Select a node.</p></div>\
         <div id=\"signin\" class=\"card\"></div><div id=\"editor\" class=\"card\"></div>\
         </section></div>",
        start = esc(path),
        root = root(s),
    )
}

/// The charts page's body (drawn by the script from the event stream).
pub fn charts_page(s: &Snapshot) -> String {
    let note = if s.metrics_source == "prometheus" {
        "Per op, from the server's <code>/metrics</code>: requests per second, and p50/p99 \
         latency of the requests answered in each interval (from histogram buckets)."
    } else {
        "From <code>mntr</code>: reads and updates per second; the <em>p50</em> line is the \
         interval's <strong>mean</strong> latency and the <em>p99</em> line the server's running \
         <strong>max</strong> latency (the server reports no percentiles)."
    };
    format!(
        "<section><h2>Throughput and latency, last 5 minutes</h2><p class=\"muted\">{note}</p>\
         <div id=\"charts\"></div></section>"
    )
}

fn opt(v: Option<&String>) -> String {
    v.map_or_else(|| "–".to_string(), |s| esc(s))
}

/// Server status, one row per member.
pub fn status(s: &Snapshot) -> String {
    let mut h = String::from("<h2>Server</h2><table class=\"status\"><thead><tr><th>member</th><th>mode</th><th>version</th><th>zxid</th><th>znodes</th><th>sessions</th><th>watches</th><th>outstanding</th><th>latency avg/max ms</th><th>fsync avg/max ms</th></tr></thead><tbody>");
    for m in &s.members {
        let g = |k: &str| m.mntr.get(k);
        let mode = m.mode.as_ref().or(g("server_state"));
        let version = m.version.as_ref().or(g("version"));
        let version = version.map(|v| v.split(',').next().unwrap_or(v).to_string());
        let pair = |a: &str, b: &str| match (g(a), g(b)) {
            (Some(a), Some(b)) => format!("{} / {}", esc(a), esc(b)),
            _ => "–".to_string(),
        };
        let _ = write!(
            h,
            "<tr><td>{}</td><td class=\"mode\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&m.addr),
            opt(mode),
            opt(version.as_ref()),
            opt(m.zxid.as_ref()),
            opt(g("znode_count")),
            m.sessions.map_or_else(|| "–".into(), |n| n.to_string()),
            opt(g("watch_count")),
            opt(g("outstanding_requests")),
            pair("avg_latency", "max_latency"),
            pair("avg_fsynctime", "max_fsynctime"),
        );
        for e in &m.errors {
            let _ = write!(
                h,
                "<tr class=\"err\"><td></td><td colspan=\"9\">{}</td></tr>",
                esc(e)
            );
        }
    }
    h.push_str("</tbody></table>");
    for e in &s.errors {
        let _ = write!(h, "<p class=\"error\">{}</p>", esc(e));
    }
    h
}

/// The root's children.
pub fn root(s: &Snapshot) -> String {
    let mut h = format!(
        "<h2>/ <span class=\"count\">{}</span></h2><ul class=\"root\">",
        s.root.len()
    );
    for c in &s.root {
        let path = format!("/{}", c.name);
        let n = c.children.map_or_else(String::new, |n| {
            format!(" <span class=\"muted\">({n})</span>")
        });
        let _ = write!(
            h,
            "<li><a href=\"/tree?path={}\">{}</a>{n}</li>",
            url_path(&path),
            esc(&path)
        );
    }
    h.push_str("</ul>");
    h
}

/// Live sessions with their ephemerals.
pub fn sessions(s: &Snapshot) -> String {
    let mut h = format!(
        "<h2>Sessions <span class=\"count\">{}</span></h2><table class=\"sessions\"><thead><tr><th>session</th><th>client</th><th>timeout</th><th>ephemeral nodes</th></tr></thead><tbody>",
        s.sessions.len()
    );
    for r in &s.sessions {
        let eph = if r.ephemerals.is_empty() {
            "<span class=\"muted\">none</span>".to_string()
        } else {
            r.ephemerals
                .iter()
                .map(|p| format!("<code>{}</code>", esc(p)))
                .collect::<Vec<_>>()
                .join("<br>")
        };
        let badge = if r.dashboard {
            " <span class=\"badge\">this dashboard</span>"
        } else {
            ""
        };
        let _ = write!(
            h,
            "<tr class=\"session\" data-session=\"{id}\"><td><code>{id}</code>{badge}</td><td>{}</td><td>{}</td><td>{eph}</td></tr>",
            r.peer.as_deref().map_or_else(|| "–".into(), esc),
            r.timeout_ms
                .map_or_else(|| "–".into(), |t| format!("{} s", t as f64 / 1000.0)),
            id = sid(r.id),
        );
    }
    h.push_str("</tbody></table>");
    if let Some(n) = &s.sessions_note {
        let _ = write!(h, "<p class=\"muted\">{}</p>", esc(n));
    }
    h
}

fn who(c: &Contender) -> String {
    let session = c.session.map_or_else(|| "owner unknown".to_string(), sid);
    let role = if c.role.is_empty() {
        String::new()
    } else {
        format!("{} ", c.role)
    };
    format!(
        "<span class=\"who\" title=\"{node}\">{role}<code>{session}</code> <span class=\"token\">token {}</span></span>",
        c.token,
        node = esc(&c.node),
    )
}

fn list(cs: &[Contender], class: &str) -> String {
    if cs.is_empty() {
        return "<span class=\"muted\">none</span>".into();
    }
    cs.iter()
        .enumerate()
        .map(|(i, c)| format!("<span class=\"{class}\">{}. {}</span>", i + 1, who(c)))
        .collect::<Vec<_>>()
        .join("<br>")
}

fn tree_link(path: &str) -> String {
    format!(
        "<a href=\"/tree?path={}\"><code>{}</code></a>",
        url_path(path),
        esc(path)
    )
}

/// The recipe overview.
pub fn recipes(s: &Snapshot) -> String {
    let o = &s.overview;
    let mut h = String::from("<h2>Coordination</h2>");
    let scan = &s.scan;
    let _ = write!(
        h,
        "<p class=\"muted scan\">Found by scanning {} nodes under {} in {} ms (budget {}).",
        scan.listed,
        esc(&scan.roots.join(", ")),
        scan.took_ms,
        scan.budget
    );
    if scan.truncated {
        h.push_str(" <strong class=\"cut\">The scan was cut at its budget: nodes beyond it were not looked at.</strong>");
    }
    h.push_str("</p>");
    let mut any = false;
    if !o.locks.is_empty() {
        any = true;
        h.push_str("<h3>Locks</h3><table class=\"locks\"><thead><tr><th>lock</th><th>kind</th><th>held by (session, fencing token)</th><th>waiting, in order</th></tr></thead><tbody>");
        for l in &o.locks {
            let _ = write!(
                h,
                "<tr class=\"lock\" data-path=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&l.path),
                tree_link(&l.path),
                l.kind,
                list(&l.holders, "holder"),
                list(&l.waiters, "waiter")
            );
        }
        h.push_str("</tbody></table>");
    }
    if !o.semaphores.is_empty() {
        any = true;
        h.push_str("<h3>Semaphores</h3><table><thead><tr><th>semaphore</th><th>leases held</th><th>acquiring</th></tr></thead><tbody>");
        for x in &o.semaphores {
            let _ = write!(
                h,
                "<tr class=\"semaphore\"><td>{}</td><td>{}</td><td>{}</td></tr>",
                tree_link(&x.path),
                list(&x.leases, "holder"),
                list(&x.acquiring, "waiter")
            );
        }
        h.push_str("</tbody></table>");
    }
    if !o.elections.is_empty() {
        any = true;
        h.push_str("<h3>Elections</h3><table><thead><tr><th>election</th><th>leader</th><th>candidates, in line</th></tr></thead><tbody>");
        for e in &o.elections {
            let _ = write!(
                h,
                "<tr class=\"election\"><td>{}</td><td>{}</td><td>{}</td></tr>",
                tree_link(&e.path),
                e.leader
                    .as_ref()
                    .map_or_else(|| "<span class=\"muted\">none</span>".into(), who),
                list(&e.candidates, "waiter")
            );
        }
        h.push_str("</tbody></table>");
    }
    if !o.queues.is_empty() {
        any = true;
        h.push_str("<h3>Queues</h3><table><thead><tr><th>queue</th><th>depth</th><th>claimed</th><th>head</th></tr></thead><tbody>");
        for q in &o.queues {
            let _ = write!(
                h,
                "<tr class=\"queue\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                tree_link(&q.path),
                q.depth,
                q.claimed,
                q.head.as_deref().map_or_else(|| "–".into(), esc)
            );
        }
        h.push_str("</tbody></table>");
    }
    if !o.barriers.is_empty() {
        any = true;
        h.push_str("<h3>Barriers</h3><table><thead><tr><th>barrier</th><th>members inside</th><th>released</th></tr></thead><tbody>");
        for b in &o.barriers {
            let _ = write!(
                h,
                "<tr class=\"barrier\"><td>{}</td><td>{}</td><td>{}</td></tr>",
                tree_link(&b.path),
                esc(&b.members.join(", ")),
                if b.ready { "yes" } else { "no" }
            );
        }
        h.push_str("</tbody></table>");
    }
    for t in &o.transactions {
        any = true;
        h.push_str(&txn_tree(t));
    }
    if !o.procedures.is_empty() {
        any = true;
        h.push_str("<h3>Procedures</h3><table><thead><tr><th>procedure</th><th>instance</th><th>phase</th><th>acquired</th><th>done</th><th>live members</th></tr></thead><tbody>");
        for p in &o.procedures {
            if p.instances.is_empty() {
                let _ = write!(
                    h,
                    "<tr class=\"procedure\"><td>{}</td><td colspan=\"4\" class=\"muted\">no instance</td><td>{}</td></tr>",
                    tree_link(&p.path),
                    esc(&p.members.join(", "))
                );
            }
            for i in &p.instances {
                let of = if i.expected.is_empty() {
                    String::new()
                } else {
                    format!(" of {}", i.expected.len())
                };
                let _ = write!(
                    h,
                    "<tr class=\"procedure\"><td>{}</td><td>{}</td><td>{}</td><td>{}{of}: {}</td><td>{}{of}: {}</td><td>{}</td></tr>",
                    tree_link(&p.path),
                    esc(&i.instance),
                    i.phase,
                    i.acquired.len(),
                    esc(&i.acquired.join(", ")),
                    i.done.len(),
                    esc(&i.done.join(", ")),
                    esc(&p.members.join(", "))
                );
            }
        }
        h.push_str("</tbody></table>");
    }
    for l in &o.ledgers {
        any = true;
        let shown: Vec<String> = l.ledgers.iter().take(50).map(|id| id.to_string()).collect();
        let more = if l.ledgers.len() > 50 { " …" } else { "" };
        let _ = write!(
            h,
            "<h3>Ledgers <span class=\"muted\">{}</span></h3><table class=\"ledgers\"><tbody>\
             <tr><th>bookies</th><td>{}</td></tr><tr><th>read-only bookies</th><td>{}</td></tr>\
             <tr><th>ledgers ({})</th><td>{}{more}</td></tr><tr><th>under-replicated</th><td>{}</td></tr></tbody></table>",
            esc(&l.path),
            esc(&l.bookies.join(", ")),
            esc(&l.readonly.join(", ")),
            l.ledgers.len(),
            shown.join(", "),
            l.underreplicated
        );
    }
    if !any {
        h.push_str("<p class=\"muted\">No locks, elections, queues, barriers, transactions, procedures or ledgers found.</p>");
    }
    h
}

fn txn_tree(t: &TxnTree) -> String {
    let mut h = format!(
        "<h3>Transactions <span class=\"muted\">{} · participants: {}</span></h3>",
        esc(&t.root),
        esc(&t.members.join(", "))
    );
    if let Some(e) = &t.error {
        let _ = write!(h, "<p class=\"error\">{}</p>", esc(e));
    }
    if t.txns.is_empty() {
        h.push_str("<p class=\"muted\">No transaction.</p>");
        return h;
    }
    h.push_str("<table class=\"txns\"><thead><tr><th>txid</th><th>phase</th><th>votes</th><th>decision</th><th>not acknowledged</th><th>coordinator</th></tr></thead><tbody>");
    for x in &t.txns {
        let votes: Vec<String> = x
            .votes
            .iter()
            .map(|(p, v)| format!("{}: {}", esc(p), esc(v)))
            .collect();
        let _ = write!(
            h,
            "<tr class=\"txn\"><td>{}</td><td class=\"phase\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&x.txid),
            x.phase,
            votes.join("<br>"),
            x.decision.as_deref().map_or_else(|| "–".into(), esc),
            esc(&x.unacked.join(", ")),
            esc(&x.coordinator)
        );
    }
    h.push_str("</tbody></table>");
    h
}

/// The watch tables: by session and by path.
pub fn watches(s: &Snapshot) -> String {
    let Some(w) = &s.watches else {
        return "<h2>Watches</h2><p class=\"muted\">The server did not answer <code>wchc</code> \
                (four-letter-word whitelist).</p>"
            .into();
    };
    let mut by_path: std::collections::BTreeMap<&str, Vec<i64>> = Default::default();
    let mut h = String::from("<h2>Watches by session</h2><table class=\"watches\"><thead><tr><th>session</th><th>paths</th></tr></thead><tbody>");
    for (sid_, paths) in w {
        for p in paths {
            by_path.entry(p).or_default().push(*sid_);
        }
        let _ = write!(
            h,
            "<tr><td><code>{}</code></td><td>{}</td></tr>",
            sid(*sid_),
            paths
                .iter()
                .map(|p| format!("<code>{}</code>", esc(p)))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    h.push_str("</tbody></table><h2>Watches by path</h2><table class=\"watches\"><thead><tr><th>path</th><th>sessions</th></tr></thead><tbody>");
    for (p, sids) in by_path {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td></tr>",
            tree_link(p),
            sids.iter()
                .map(|s| format!("<code>{}</code>", sid(*s)))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    h.push_str("</tbody></table>");
    h
}

/// The JSON of one snapshot event: rendered sections and chart points.
pub fn event_json(s: &Snapshot) -> String {
    json!({
        "seq": s.seq,
        "taken_ms": s.taken_ms,
        "sections": {
            "status": status(s),
            "root": root(s),
            "sessions": sessions(s),
            "recipes": recipes(s),
            "watches": watches(s),
        },
        // The newest chart point only: a page gets the whole history once (`/api/history`)
        // and appends, so an event stays small.
        "point": s.history.last(),
        "metrics_source": s.metrics_source,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_encodes_paths() {
        assert_eq!(
            esc("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
        assert_eq!(url_path("/a b/ü"), "/a%20b/%C3%BC");
        assert_eq!(sid(-1), "0xffffffffffffffff");
    }

    #[test]
    fn home_shows_a_hostile_node_name_as_text() {
        let mut s = Snapshot::default();
        s.root.push(crate::model::RootChild {
            name: "<script>alert(1)</script>".into(),
            children: None,
        });
        let html = home(&s);
        assert!(!html.contains("<script>alert"));
        assert!(html.contains("&lt;script&gt;"));
    }
}
