// zkit dashboard: live sections (server-sent events), the tree browser, sign-in and writes,
// and the charts. Hand-written, no dependencies. The server renders every live section; this
// script only swaps them in, so the page without script shows the same data (one load old).
'use strict';

(function () {
  const $ = (sel, root) => (root || document).querySelector(sel);
  const el = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const kid of kids) {
      if (kid === null || kid === undefined) continue;
      e.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return e;
  };
  const page = document.body.dataset.page;
  let me = { user: null, csrf: null };
  let lastEvent = null;
  let chartPoints = []; // oldest first

  // ---- sign-in state ------------------------------------------------------------------
  async function api(method, url, body) {
    const opts = { method, headers: {}, credentials: 'same-origin' };
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    if (method === 'POST' && me.csrf) opts.headers['X-CSRF-Token'] = me.csrf;
    const r = await fetch(url, opts);
    let data = null;
    try { data = await r.json(); } catch (_) { data = { error: 'HTTP ' + r.status }; }
    if (!r.ok) throw new Error((data && data.error) || ('HTTP ' + r.status));
    return data;
  }

  function renderMe() {
    const box = $('#me');
    if (!box) return;
    box.textContent = '';
    if (me.user) {
      box.append('signed in as ', el('strong', { id: 'me-user' }, me.user), ' ',
        el('button', { id: 'signout', type: 'button', onclick: async () => {
          try { await api('POST', '/api/logout', {}); } catch (_) { /* gone already */ }
          me = { user: null, csrf: null };
          renderMe(); renderSignin(); renderEditor();
        } }, 'sign out'));
    } else {
      box.append(page === 'Tree' ? 'not signed in (read-only)' : el('a', { href: '/tree' }, 'sign in to edit'));
    }
  }

  function renderSignin() {
    const box = $('#signin');
    if (!box) return;
    box.textContent = '';
    if (me.user) return;
    const msg = el('p', { class: 'msg', id: 'signin-msg' });
    const form = el('form', { id: 'signin-form', autocomplete: 'off' },
      el('h3', {}, 'Sign in'),
      el('p', { class: 'muted' }, 'A ZooKeeper digest identity: your writes (and reads) go through a ZooKeeper session authenticated as user:password, so the nodes\u2019 ACLs apply. ZooKeeper accepts any digest identity; what it may do is up to the ACLs.'),
      el('label', {}, 'user ', el('input', { name: 'user', id: 'signin-user', required: '' })),
      el('label', {}, 'password ', el('input', { name: 'password', id: 'signin-password', type: 'password' })),
      el('button', { type: 'submit', id: 'signin-submit' }, 'sign in'), msg);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      msg.textContent = 'signing in\u2026';
      try {
        me = await api('POST', '/api/login', { user: form.user.value, password: form.password.value });
        form.password.value = '';
        renderMe(); renderSignin(); renderEditor();
        if (selected) select(selected);
      } catch (e) { msg.textContent = e.message; }
    });
    box.append(form);
  }

  // ---- live sections ------------------------------------------------------------------
  function applyEvent(ev) {
    lastEvent = ev;
    for (const [name, html] of Object.entries(ev.sections || {})) {
      const sec = document.querySelector('[data-section="' + name + '"]');
      if (sec) sec.innerHTML = html; // rendered and escaped by the server
    }
    const live = $('#live');
    if (live) { live.textContent = 'live #' + ev.seq; live.className = 'live on'; }
    if (page === 'Charts') {
      if (ev.point && !chartPoints.some((p) => p.t === ev.point.t)) {
        chartPoints.push(ev.point);
        while (chartPoints.length > 300) chartPoints.shift();
      }
      drawCharts({ history: chartPoints, metrics_source: ev.metrics_source });
    }
    if (page === 'Tree') refreshTreeSoon();
  }

  function connect() {
    if (!window.EventSource) return;
    const src = new EventSource('/events');
    src.addEventListener('snapshot', (m) => {
      try { applyEvent(JSON.parse(m.data)); } catch (e) { console.error(e); }
    });
    src.onerror = () => {
      const live = $('#live');
      if (live) { live.textContent = 'reconnecting'; live.className = 'live off'; }
    };
  }

  // ---- tree browser -------------------------------------------------------------------
  let selected = null;
  let selectedNode = null;
  const expanded = new Set(['/']);
  const join = (parent, name) => (parent === '/' ? '/' + name : parent + '/' + name);

  async function loadNode(path) {
    return api('GET', '/api/node?path=' + encodeURIComponent(path));
  }

  async function fillChildren(li, path) {
    const toggle = li.querySelector(':scope > button.toggle');
    if (toggle) toggle.textContent = '\u25be';
    let ul = li.querySelector(':scope > ul');
    if (!ul) { ul = el('ul'); li.append(ul); }
    try {
      const n = await loadNode(path);
      const have = new Map([...ul.children].map((c) => [c.dataset.path, c]));
      const want = n.children.map((c) => join(path, c));
      for (const [p, c] of have) if (!want.includes(p)) c.remove();
      want.forEach((p, i) => {
        let c = have.get(p);
        if (!c) c = treeItem(p, n.children[i]);
        ul.append(c); // keeps the order
      });
      for (const p of want) {
        if (expanded.has(p)) {
          const c = ul.querySelector(':scope > li[data-path="' + CSS.escape(p) + '"]');
          if (c) fillChildren(c, p);
        }
      }
    } catch (e) {
      ul.textContent = '';
      ul.append(el('li', { class: 'error' }, e.message));
    }
  }

  function treeItem(path, name) {
    const li = el('li', { 'data-path': path });
    const toggle = el('button', { class: 'toggle', type: 'button', title: 'expand' }, expanded.has(path) ? '\u25be' : '\u25b8');
    const label = el('a', { href: '/tree?path=' + encodeURIComponent(path), class: 'node-name' }, name);
    toggle.addEventListener('click', () => {
      if (expanded.has(path)) {
        expanded.delete(path);
        toggle.textContent = '\u25b8';
        const ul = li.querySelector(':scope > ul');
        if (ul) ul.remove();
      } else {
        expanded.add(path);
        toggle.textContent = '\u25be';
        fillChildren(li, path);
      }
    });
    label.addEventListener('click', (ev) => { ev.preventDefault(); select(path); });
    li.append(toggle, label);
    if (expanded.has(path)) fillChildren(li, path);
    return li;
  }

  let refreshTimer = null;
  let lastRefresh = 0;
  // Expanded nodes are re-read at most every 5 s while events arrive: one getChildren per
  // expanded node, only for browsers showing the tree.
  function refreshTreeSoon() {
    if (refreshTimer) return;
    const wait = Math.max(0, 5000 - (Date.now() - lastRefresh));
    refreshTimer = setTimeout(() => {
      refreshTimer = null;
      lastRefresh = Date.now();
      const root = $('#tree li[data-path="/"]');
      if (root) fillChildren(root, '/');
    }, wait);
  }

  function decode(b64) {
    if (b64 === null || b64 === undefined) return null;
    const bin = atob(b64);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return bytes;
  }

  function hexdump(bytes) {
    const lines = [];
    for (let i = 0; i < bytes.length; i += 16) {
      const row = bytes.slice(i, i + 16);
      const hex = [...row].map((b) => b.toString(16).padStart(2, '0')).join(' ');
      const txt = [...row].map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : '.')).join('');
      lines.push(i.toString(16).padStart(8, '0') + '  ' + hex.padEnd(47) + '  ' + txt);
    }
    return lines.join('\n');
  }

  function dataViews(bytes) {
    const box = el('div', { class: 'data' });
    if (bytes === null) { box.append(el('p', { class: 'muted' }, 'data not readable')); return box; }
    const text = new TextDecoder('utf-8', { fatal: false }).decode(bytes);
    let pretty = null;
    try { pretty = JSON.stringify(JSON.parse(text), null, 2); } catch (_) { pretty = null; }
    const pre = el('pre', { id: 'data-view' });
    const views = { text: () => text, json: () => (pretty === null ? '(not JSON)' : pretty), hex: () => hexdump(bytes) };
    const tabs = el('div', { class: 'tabs' });
    const show = (name) => {
      pre.textContent = views[name]();
      for (const b of tabs.children) b.classList.toggle('active', b.dataset.view === name);
    };
    for (const name of Object.keys(views)) {
      tabs.append(el('button', { type: 'button', 'data-view': name, onclick: () => show(name) }, name));
    }
    box.append(tabs, pre);
    show(pretty !== null ? 'json' : (bytes.every((b) => b >= 9 && b < 127 || b >= 128) ? 'text' : 'hex'));
    return box;
  }

  async function select(path) {
    selected = path;
    window.history.replaceState(null, '', '/tree?path=' + encodeURIComponent(path));
    const box = $('#node');
    box.textContent = '';
    try {
      const n = await loadNode(path);
      selectedNode = n;
      const s = n.stat;
      const stat = el('table', { class: 'stat' });
      for (const [k, v] of Object.entries(s)) {
        const shown = (k === 'ctime' || k === 'mtime') ? new Date(v).toISOString()
          : (k.endsWith('zxid') || k === 'ephemeral_owner') ? '0x' + BigInt.asUintN(64, BigInt(v)).toString(16) : v;
        stat.append(el('tr', {}, el('th', {}, k), el('td', {}, shown)));
      }
      const acl = el('table', { class: 'acl' }, el('tr', {}, el('th', {}, 'scheme'), el('th', {}, 'id'), el('th', {}, 'perms')));
      for (const a of n.acl) acl.append(el('tr', {}, el('td', {}, a.scheme), el('td', {}, a.id), el('td', {}, a.perms)));
      box.append(el('h2', { id: 'node-path' }, n.path),
        ...n.notes.map((t) => el('p', { class: 'error' }, t)),
        el('h3', {}, 'Data ', el('span', { class: 'muted' }, s.data_length + ' bytes, version ' + s.version)),
        dataViews(decode(n.data_b64)),
        el('div', { class: 'cols' }, el('div', {}, el('h3', {}, 'Stat'), stat), el('div', {}, el('h3', {}, 'ACL'), acl)));
    } catch (e) {
      selectedNode = null;
      box.append(el('h2', {}, path), el('p', { class: 'error' }, e.message));
    }
    renderEditor();
  }

  function renderEditor() {
    const box = $('#editor');
    if (!box) return;
    box.textContent = '';
    if (!me.user) {
      box.append(el('p', { class: 'muted' }, 'Sign in to create, change or delete nodes.'));
      return;
    }
    const msg = el('p', { class: 'msg', id: 'editor-msg' });
    const done = (text) => { msg.textContent = text; };
    const fail = (e) => { msg.textContent = e.message; msg.className = 'msg error'; };
    const parent = selected || '/';

    const create = el('form', { id: 'create-form' },
      el('h3', {}, 'Create a child of ', el('code', {}, parent)),
      el('label', {}, 'name ', el('input', { name: 'name', id: 'create-name', required: '' })),
      el('label', {}, 'data ', el('textarea', { name: 'data', id: 'create-data', rows: '2' })),
      el('label', {}, 'kind ', (() => {
        const sel = el('select', { name: 'kind', id: 'create-kind' });
        for (const k of ['persistent', 'ephemeral', 'persistent_sequential', 'container']) sel.append(el('option', { value: k }, k));
        return sel;
      })()),
      el('label', {}, el('input', { type: 'checkbox', name: 'creator_only', id: 'create-creator-only' }), ' only my identity may use it (ACL auth:cdrwa)'),
      el('button', { type: 'submit', id: 'create-submit' }, 'create'));
    create.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      msg.className = 'msg';
      try {
        const r = await api('POST', '/api/create', {
          path: join(parent, create.name.value), data: create.data.value,
          kind: create.kind.value, creator_only: create.creator_only.checked,
        });
        done('created ' + r.created);
        expanded.add(parent);
        const li = $('#tree li[data-path="' + CSS.escape(parent) + '"]');
        if (li) fillChildren(li, parent);
      } catch (e) { fail(e); }
    });
    box.append(create);

    if (selectedNode) {
      const n = selectedNode;
      const bytes = decode(n.data_b64);
      const set = el('form', { id: 'set-form' },
        el('h3', {}, 'Set data of ', el('code', {}, n.path)),
        el('textarea', { name: 'data', id: 'set-data', rows: '4' }),
        el('label', {}, el('input', { type: 'checkbox', name: 'check', id: 'set-check', checked: '' }), ' only if still at version ' + n.stat.version),
        el('button', { type: 'submit', id: 'set-submit' }, 'save'));
      set.data.value = bytes === null ? '' : new TextDecoder().decode(bytes);
      set.addEventListener('submit', async (ev) => {
        ev.preventDefault();
        msg.className = 'msg';
        try {
          const r = await api('POST', '/api/set', { path: n.path, data: set.data.value, version: set.check.checked ? n.stat.version : null });
          done('saved, version ' + r.version);
          select(n.path);
        } catch (e) { fail(e); }
      });
      const del = el('button', { type: 'button', id: 'delete-submit', class: 'danger' }, 'delete ' + n.path + ' (version ' + n.stat.version + ')');
      del.addEventListener('click', async () => {
        if (!window.confirm('Delete ' + n.path + '?')) return;
        msg.className = 'msg';
        try {
          await api('POST', '/api/delete', { path: n.path, version: n.stat.version });
          done('deleted ' + n.path);
          const up = n.path.lastIndexOf('/') > 0 ? n.path.slice(0, n.path.lastIndexOf('/')) : '/';
          const li = $('#tree li[data-path="' + CSS.escape(up) + '"]');
          if (li) fillChildren(li, up);
          select(up);
        } catch (e) { fail(e); }
      });
      if (n.path !== '/') box.append(set, del);
    }
    box.append(msg);
  }

  function startTree() {
    const tree = $('#tree');
    if (!tree) return;
    const start = tree.dataset.start || '/';
    // Expand the way to the start node.
    let p = '';
    for (const part of start.split('/').filter(Boolean)) { p += '/' + part; expanded.add(p); }
    if (start !== '/') expanded.delete(start);
    tree.textContent = '';
    const ul = el('ul', { class: 'tree' });
    ul.append(treeItem('/', '/'));
    tree.append(ul);
    select(start);
  }

  // ---- charts -------------------------------------------------------------------------
  const COLORS = ['#2b7bb9', '#d9534f', '#5cb85c', '#f0ad4e', '#8e44ad', '#16a085', '#7f8c8d', '#c0392b', '#2c3e50', '#d35400'];
  const SVG = 'http://www.w3.org/2000/svg';
  const svg = (tag, attrs) => {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  };

  function chart(title, unit, points, names, pick) {
    const W = 640, H = 200, L = 50, R = 10, T = 10, B = 24;
    const box = el('div', { class: 'chart' }, el('h3', {}, title));
    const s = svg('svg', { viewBox: '0 0 ' + W + ' ' + H, width: W, height: H, role: 'img' });
    let max = 0;
    for (const p of points) for (const n of names) { const v = pick(p.series[n]); if (v !== null && v > max) max = v; }
    if (max <= 0) max = 1;
    const t0 = points.length ? points[0].t : 0;
    const t1 = points.length ? points[points.length - 1].t : 1;
    const x = (t) => L + (W - L - R) * (t1 === t0 ? 1 : (t - t0) / (t1 - t0));
    const y = (v) => T + (H - T - B) * (1 - v / max);
    s.append(svg('rect', { x: L, y: T, width: W - L - R, height: H - T - B, class: 'plot' }));
    for (const f of [0, 0.5, 1]) {
      s.append(svg('line', { x1: L, x2: W - R, y1: y(max * f), y2: y(max * f), class: 'grid' }));
      const label = svg('text', { x: L - 4, y: y(max * f) + 4, 'text-anchor': 'end', class: 'axis' });
      label.textContent = (max * f).toPrecision(3);
      s.append(label);
    }
    const span = svg('text', { x: W - R, y: H - 6, 'text-anchor': 'end', class: 'axis' });
    span.textContent = points.length ? Math.round((t1 - t0) / 1000) + ' s shown, now at right (' + unit + ')' : 'waiting for data';
    s.append(span);
    const legend = el('div', { class: 'legend' });
    names.forEach((n, i) => {
      const color = COLORS[i % COLORS.length];
      let d = '';
      for (const p of points) {
        const v = pick(p.series[n]);
        if (v === null || v === undefined) continue;
        d += (d ? 'L' : 'M') + x(p.t).toFixed(1) + ',' + y(v).toFixed(1);
      }
      if (d) s.append(svg('path', { d, stroke: color, class: 'series' }));
      legend.append(el('span', { class: 'key' }, el('i'), n));
      legend.lastChild.firstChild.style.background = color;
    });
    box.append(s, legend);
    return box;
  }

  function drawCharts(ev) {
    const box = $('#charts');
    if (!box) return;
    const points = ev.history || [];
    const names = new Set();
    for (const p of points) for (const [n, v] of Object.entries(p.series)) if (v.rate > 0) names.add(n);
    const list = [...names].sort();
    const approx = ev.metrics_source !== 'prometheus';
    box.textContent = '';
    box.append(
      chart('Throughput', 'ops/s', points, list, (v) => (v ? v.rate : null)),
      chart(approx ? 'Latency: interval mean' : 'Latency p50', 'ms', points, list, (v) => (v && v.p50 !== null ? v.p50 : null)),
      chart(approx ? 'Latency: server max since start' : 'Latency p99', 'ms', points, list, (v) => (v && v.p99 !== null ? v.p99 : null)));
  }

  // ---- start --------------------------------------------------------------------------
  async function start() {
    try { me = await api('GET', '/api/me'); } catch (_) { me = { user: null }; }
    renderMe();
    if (page === 'Tree') { renderSignin(); startTree(); }
    if (page === 'Charts') {
      try {
        const h = await api('GET', '/api/history');
        chartPoints = h.history || [];
        drawCharts(h);
      } catch (_) { drawCharts({ history: [], metrics_source: 'prometheus' }); }
    }
    connect();
  }
  start();
})();
