// ontime dashboard: plain JavaScript, no dependencies, no build step.
// It talks to the ontime HTTP API (docs/api.md) with the same bearer token
// as the CLI, renders with DOM calls only (textContent, never innerHTML with
// data: ids and bodies are untrusted), and refreshes the page in view every
// REFRESH_MS while the tab is visible.
'use strict';

const REFRESH_MS = 2000;
const API = (document.querySelector('meta[name="ontime-api"]').content || '/').replace(/\/?$/, '/');
const TOKEN_KEY = 'ontime.token';

// ---- HTTP ----

class APIError extends Error {
  constructor(status, code, message) {
    super(message || code || ('HTTP ' + status));
    this.status = status;
    this.code = code;
  }
}

async function api(method, path, body) {
  const headers = {};
  const tok = localStorage.getItem(TOKEN_KEY);
  if (tok) headers.Authorization = 'Bearer ' + tok;
  const init = {method, headers, cache: 'no-store'};
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const r = await fetch(API + path.replace(/^\//, ''), init);
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (r.status === 401) {
    askToken();
    throw new APIError(401, 'unauthorized', 'a token is needed');
  }
  if (!r.ok) {
    const err = data && data.error ? data.error : {};
    throw new APIError(r.status, err.code, err.message || text);
  }
  return data;
}

const enc = encodeURIComponent;
const topicPath = (t) => 'v1/topics/' + enc(t);
const timerPath = (t, id) => topicPath(t) + '/timers/' + enc(id);
const deadPath = (t, id) => topicPath(t) + '/dead/' + enc(id);

// ---- DOM helpers ----

// h builds an element: h('a', {href: '#/'}, 'text', child, ...). Strings
// become text nodes; attributes starting with "on" are listeners.
function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids.flat()) {
    if (k === undefined || k === null || k === false) continue;
    el.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return el;
}

const svgNS = 'http://www.w3.org/2000/svg';
function s(tag, attrs, ...kids) {
  const el = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  for (const k of kids) el.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return el;
}

function flash(msg, isError) {
  const box = document.getElementById('flash');
  const d = h('div', {class: isError ? 'error' : ''}, msg);
  box.replaceChildren(d);
  setTimeout(() => { if (d.parentNode) d.remove(); }, isError ? 8000 : 4000);
}

// ---- formatting ----

// esc shows a stored string (an id, a body, a header, an error) with every
// character a reader cannot see, or that changes how the rest reads,
// written as an escape, as the CLI prints them on a terminal: control
// characters (\x1b, \u009b, line breaks as \n), Unicode format
// characters such as the bidirectional overrides (\u202e makes
// "invoice-\u202egpj.exe" read "invoice-exe.jpg"), line and paragraph
// separators, private-use and unassigned code points, lone surrogates.
// Letters, marks, digits, punctuation, symbols and spaces stay. multiline
// keeps line breaks and tabs (a body in a <pre>).
const NOT_GRAPHIC = /[^\p{L}\p{M}\p{N}\p{P}\p{S}\p{Zs}]/gu;
function esc(v, multiline) {
  const str = String(v === undefined || v === null ? '' : v);
  return str.replace(NOT_GRAPHIC, (c) => {
    if (multiline && (c === '\n' || c === '\t')) return c;
    if (c === '\n') return '\\n';
    if (c === '\r') return '\\r';
    if (c === '\t') return '\\t';
    const cp = c.codePointAt(0);
    if (cp < 0x80) return '\\x' + cp.toString(16).padStart(2, '0');
    if (cp <= 0xffff) return '\\u' + cp.toString(16).padStart(4, '0');
    return '\\U' + cp.toString(16).padStart(8, '0');
  });
}

function fmtTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z').replace(/Z$/, ' UTC');
}

function fmtIn(iso) {
  const ms = new Date(iso) - Date.now();
  const a = Math.abs(ms);
  let t;
  if (a < 1000) t = Math.round(a) + ' ms';
  else if (a < 90e3) t = Math.round(a / 1e3) + ' s';
  else if (a < 90 * 60e3) t = Math.round(a / 60e3) + ' min';
  else if (a < 36 * 3600e3) t = (a / 3600e3).toFixed(1) + ' h';
  else t = (a / 86400e3).toFixed(1) + ' days';
  return ms >= 0 ? 'in ' + t : t + ' ago';
}

function fmtMs(v) {
  if (v === undefined || v === null) return '—';
  if (v < 1) return v.toFixed(2) + ' ms';
  if (v < 1000) return v.toFixed(1) + ' ms';
  return (v / 1000).toFixed(2) + ' s';
}

function lateClass(ms) {
  if (ms <= 10) return 'ok';
  if (ms <= 1000) return 'warn';
  return 'bad';
}

// fmtBody is a body as text, escaped (esc): base64 for bytes, JSON
// indented. A list's cut body (body_limit) is its first bytes and "…".
function fmtBody(o, multiline) {
  if (o.body_preview !== undefined && o.body_preview !== null) return esc(o.body_preview, multiline) + '…';
  if (o.body_base64 !== undefined && o.body_base64 !== null) return 'base64:' + o.body_base64;
  if (o.body === undefined || o.body === null) return '';
  if (typeof o.body === 'string') return esc(o.body, multiline);
  return esc(JSON.stringify(o.body, null, 2), multiline);
}

// BODY_LIMIT is the most of each body a list page loads: a page of 50
// bodies of 1 MiB stays small; a timer's page has all of it.
const BODY_LIMIT = 1024;

function fmtSize(n) {
  if (n < 1024) return n + ' B';
  if (n < 1 << 20) return (n / 1024).toFixed(1) + ' KiB';
  return (n / (1 << 20)).toFixed(1) + ' MiB';
}

// bodyCell is a list's body cell: the body (or its first KiB), and for a
// cut one its size and a link to all of it (the timer's or dead letter's page).
function bodyCell(o, wholeHref) {
  if (!o.body_truncated) return h('td', {class: 'ellipsis'}, fmtBody(o));
  return h('td', {class: 'ellipsis cut'}, fmtBody(o), ' ',
    wholeHref ? h('a', {href: wholeHref, class: 'whole'}, 'whole body (' + fmtSize(o.body_size) + ')')
      : h('span', {class: 'muted'}, '(' + fmtSize(o.body_size) + ')'));
}

function stateOf(t) {
  return h('span', {class: 'pill ' + t.state}, t.state);
}

// ---- recurring timers ----

// pauseButton pauses or resumes a recurring timer (POST …/pause|resume)
// and refreshes the page.
function pauseButton(topic, t, attrs) {
  const verb = t.recurring.paused ? 'resume' : 'pause';
  return h('button', Object.assign({class: verb, 'data-id': t.id, onclick: async () => {
    try {
      await api('POST', timerPath(topic, t.id) + '/' + verb);
      flash((verb === 'pause' ? 'Paused ' : 'Resumed ') + esc(t.id) + '.');
      refresh();
    } catch (e) { flash(verb + ' failed: ' + e.message, true); }
  }}, attrs || {}), verb === 'pause' ? 'Pause' : 'Resume');
}

// lastTick is a recurring timer's last settled tick and its outcome.
function lastTick(r) {
  if (!r.last_tick) return h('span', {class: 'muted'}, 'none yet');
  return h('span', {class: r.last_outcome === 'dead' ? 'bad' : 'ok'}, '#' + r.last_tick + ' ' + esc(r.last_outcome || ''));
}

// scheduleState is running (a tick is being delivered), paused or waiting.
function scheduleState(t) {
  if (t.recurring.paused) return h('span', {class: 'pill paused'}, 'paused');
  return t.state === 'leased' ? h('span', {class: 'pill leased'}, 'tick running') : h('span', {class: 'pill scheduled'}, 'active');
}

function schedulesTable(topic, page) {
  if (page.schedules.length === 0) return null;
  return [
    h('h2', {}, 'Schedules'),
    h('table', {id: 'schedules'},
      h('thead', {}, h('tr', {}, h('th', {}, 'id'), h('th', {}, 'schedule'), h('th', {}, 'next tick'), h('th', {}, ''),
        h('th', {class: 'num'}, 'tick'), h('th', {}, 'last outcome'), h('th', {}, 'state'), h('th', {}, ''))),
      h('tbody', {}, page.schedules.map((t) => h('tr', {'data-id': t.id},
        h('td', {class: 'id'}, h('a', {href: '#/topic/' + enc(topic) + '/timer/' + enc(t.id)}, esc(t.id))),
        h('td', {class: 'schedule'}, esc(t.recurring.schedule),
          t.recurring.missed !== 'once' ? h('span', {class: 'muted'}, ' · missed ' + esc(t.recurring.missed)) : null,
          t.recurring.jitter ? h('span', {class: 'muted'}, ' · jitter ' + esc(t.recurring.jitter)) : null),
        h('td', {class: 'next'}, fmtTime(t.recurring.tick_at)),
        h('td', {class: 'muted'}, t.recurring.paused ? 'held' : fmtIn(t.due_at)),
        h('td', {class: 'num'}, t.recurring.tick),
        h('td', {class: 'last'}, lastTick(t.recurring)),
        h('td', {class: 'state'}, scheduleState(t)),
        h('td', {}, pauseButton(topic, t)))))),
    page.complete ? null : h('p', {class: 'muted'}, 'Not every schedule is listed: the server stopped after reading ' + page.scanned + ' timers.'),
  ];
}

// ---- confirmation and token dialogs ----

// confirmDialog shows a modal and resolves to true on OK. With word set,
// OK stays disabled until the user types it (for "all" actions).
function confirmDialog(title, body, okLabel, word) {
  const dlg = document.getElementById('confirm');
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-body').replaceChildren(...[].concat(body));
  const ok = document.getElementById('confirm-ok');
  ok.textContent = okLabel;
  const typedP = document.getElementById('confirm-typed-p');
  const typed = document.getElementById('confirm-typed');
  typed.value = '';
  typedP.hidden = !word;
  ok.disabled = !!word;
  if (word) {
    document.getElementById('confirm-word').textContent = word;
    typed.oninput = () => { ok.disabled = typed.value !== word; };
  }
  return new Promise((resolve) => {
    // The close event of a dialog closed just before this one opened can
    // still be on its way: it finds this dialog open and is ignored.
    dlg.onclose = () => {
      if (!dlg.open) resolve(dlg.returnValue === 'ok' && (!word || typed.value === word));
    };
    dlg.returnValue = '';
    dlg.showModal();
    (word ? typed : document.getElementById('confirm-cancel')).focus();
  });
}

function askToken() {
  const dlg = document.getElementById('login');
  if (dlg.open) return;
  document.getElementById('login-token').value = '';
  dlg.onclose = () => {
    if (dlg.open) return;
    const v = document.getElementById('login-token').value.trim();
    if (v) {
      localStorage.setItem(TOKEN_KEY, v);
      document.getElementById('logout').hidden = false;
      route();
    }
  };
  dlg.showModal();
}

// ---- pages ----

// Each page is {load, draw}: load fetches (and is run again every
// REFRESH_MS), draw builds the page from what load returned. A page keeps
// its UI state (selection, chart scale) in its own object, so a refresh
// does not lose it.

let topicNames = [];

const MAX_TOPIC_ROWS = 500;

function topicsPage() {
  const page = {filter: ''};
  return Object.assign(page, {
    // The first MAX_TOPIC_ROWS topics that match the filter (asked of the
    // server: one call whatever the number of topics), and the totals.
    async load() {
      const f = page.filter.trim();
      const q = 'v1/topics?limit=' + (MAX_TOPIC_ROWS + 1) + (f ? '&contains=' + enc(f) : '');
      const [topics, stats] = await Promise.all([api('GET', q), api('GET', 'v1/stats')]);
      topicNames = topics.map((t) => t.topic);
      return {topics, stats, filter: f};
    },
    draw({topics, stats, filter}) {
      const lm = (t) => t.last_minute || null;
      const f = page.filter.trim().toLowerCase();
      const shown = topics.filter((t) => !f || t.topic.toLowerCase().includes(f));
      const more = topics.length > MAX_TOPIC_ROWS;
      const rows = shown.slice(0, MAX_TOPIC_ROWS).map((t) => {
        const a = lm(t);
        return h('tr', {'data-topic': t.topic},
          h('td', {}, h('a', {href: '#/topic/' + enc(t.topic)}, esc(t.topic))),
          h('td', {class: 'num scheduled'}, t.scheduled),
          h('td', {class: 'num leased'}, t.leased),
          h('td', {class: 'num dead'}, t.dead > 0 ? h('a', {href: '#/topic/' + enc(t.topic) + '/dead', class: 'bad'}, t.dead) : '0'),
          h('td', {class: 'num fired'}, a ? a.fired : '—'),
          h('td', {class: 'num'}, a ? a.acked : '—'),
          h('td', {class: 'num'}, a ? a.retried + a.dead_lettered : '—'),
          h('td', {class: 'num p50'}, a && a.fired ? h('span', {class: lateClass(a.late_p50_ms)}, fmtMs(a.late_p50_ms)) : '—'),
          h('td', {class: 'num p99'}, a && a.fired ? h('span', {class: lateClass(a.late_p99_ms)}, fmtMs(a.late_p99_ms)) : '—'),
          h('td', {class: 'num max'}, a && a.fired ? h('span', {class: lateClass(a.late_max_ms)}, fmtMs(a.late_max_ms)) : '—'),
          h('td', {class: 'num early'}, a ? h('span', {class: a.early > 0 ? 'bad' : 'ok'}, a.early) : '—'));
      });
      return [
        h('h1', {}, 'Topics'),
        h('div', {class: 'card stats'},
          stat(stats.scheduled, 'scheduled'), stat(stats.leased, 'being delivered'), stat(stats.dead, 'dead letters'),
          stat(stats.topics, 'topics'), stat(stats.delivered, 'delivered since start'), stat(stats.failed, 'failed attempts'),
          stat(stats.workers, 'workers', 'Topics this server is delivering now: one delivery worker per topic claims its due timers and hands them to the topic\'s target or watchers.'), stat(stats.store, 'store')),
        topics.length > 0 || filter ? h('div', {class: 'toolbar'},
          h('input', {id: 'filter', placeholder: 'filter topics', value: page.filter, 'aria-label': 'filter topics',
            oninput: (e) => { page.filter = e.target.value; draw(); refresh(); }}),
          h('span', {class: 'muted', id: 'shown'}, (more ? 'more than ' + MAX_TOPIC_ROWS : Math.min(shown.length, MAX_TOPIC_ROWS)) + ' of ' + stats.topics + ' topics' +
            (more ? ', the first ' + MAX_TOPIC_ROWS + ' shown' : ''))) : null,
        topics.length === 0 && filter ? h('p', {class: 'muted'}, 'No topic matches.') : null,
        topics.length === 0 && !filter
          ? h('p', {class: 'muted'}, 'No topics yet. Schedule a timer: ', h('code', {}, 'ontime schedule reminders "call Bob" --in 90s'))
          : h('table', {id: 'topics'},
            h('thead', {}, h('tr', {},
              h('th', {}, 'topic'), h('th', {class: 'num'}, 'scheduled'), h('th', {class: 'num'}, 'leased'),
              h('th', {class: 'num'}, 'dead'), h('th', {class: 'num', title: 'deliveries in the last minute'}, 'fired/min'),
              h('th', {class: 'num'}, 'acked'), h('th', {class: 'num', title: 'retried or dead-lettered'}, 'failed'),
              h('th', {class: 'num', title: 'lateness, last minute'}, 'late p50'), h('th', {class: 'num'}, 'p99'),
              h('th', {class: 'num'}, 'max'), h('th', {class: 'num', title: 'deliveries before their due time: always 0'}, 'early'))),
            h('tbody', {}, rows)),
        h('p', {class: 'muted'}, 'Last minute as this server saw it: deliveries, outcomes and how late timers fired (the store\'s clock at delivery minus the due time).'),
      ];
    },
  });
}

function stat(v, label, title) {
  return h('div', title ? {class: 'stat', title: title} : {class: 'stat'}, h('b', {}, v), h('span', {}, label));
}

const SCALES = {
  '1m': {step: '1m', buckets: 60, label: 'next hour, per minute'},
  '10m': {step: '10m', buckets: 72, label: 'next 12 hours, per 10 minutes'},
  '1h': {step: '1h', buckets: 48, label: 'next 2 days, per hour'},
  '1d': {step: '24h', buckets: 30, label: 'next 30 days, per day'},
};

function topicPage(topic) {
  const page = {scale: '1m'};
  page.load = async () => {
    const sc = SCALES[page.scale];
    const [info, timeline, timers, schedules] = await Promise.all([
      api('GET', topicPath(topic)),
      api('GET', topicPath(topic) + '/timeline?step=' + sc.step + '&buckets=' + sc.buckets),
      api('GET', topicPath(topic) + '/timers?limit=50&body_limit=' + BODY_LIMIT),
      api('GET', topicPath(topic) + '/schedules?body_limit=1'),
    ]);
    return {info, timeline, timers, schedules};
  };
  page.draw = ({info, timeline, timers, schedules}) => {
    const a = info.last_minute;
    const scaleSel = h('select', {id: 'scale', onchange: (e) => { page.scale = e.target.value; refresh(); }},
      Object.entries(SCALES).map(([k, v]) => h('option', {value: k, selected: k === page.scale}, v.label)));
    return [
      h('h1', {}, esc(topic), ' ', h('small', {}, h('a', {href: '#/topic/' + enc(topic) + '/dead'}, info.dead + ' dead letters'))),
      h('div', {class: 'card stats'},
        stat(info.scheduled, 'scheduled'), stat(info.leased, 'being delivered'), stat(info.dead, 'dead letters'),
        stat(timeline.before, 'overdue'),
        a ? stat(a.fired, 'fired, last minute') : null,
        a && a.fired ? stat(fmtMs(a.late_p99_ms), 'p99 lateness') : null,
        a ? stat(a.early, 'early') : null),
      h('div', {class: 'card chart'},
        h('div', {class: 'toolbar'}, h('b', {}, 'Upcoming'), scaleSel,
          h('span', {class: 'muted'}, timeline.after + ' later, ' + timeline.before + ' overdue')),
        chart(timeline)),
      ...(schedulesTable(topic, schedules) || []),
      h('h2', {}, 'Next timers'),
      timers.timers.length === 0 ? h('p', {class: 'muted', id: 'no-timers'}, 'No timers scheduled.') :
        h('table', {id: 'timers'},
          h('thead', {}, h('tr', {}, h('th', {}, 'id'), h('th', {}, 'due'), h('th', {}, ''), h('th', {}, 'state'),
            h('th', {class: 'num'}, 'attempt'), h('th', {}, 'body'))),
          h('tbody', {}, timers.timers.map((t) => h('tr', {'data-id': t.id},
            h('td', {class: 'id'}, h('a', {href: '#/topic/' + enc(topic) + '/timer/' + enc(t.id)}, esc(t.id))),
            h('td', {}, fmtTime(t.due_at)), h('td', {class: 'muted'}, fmtIn(t.state === 'leased' ? t.lease_until : t.due_at)),
            h('td', {}, stateOf(t)), h('td', {class: 'num'}, t.attempt),
            bodyCell(t, '#/topic/' + enc(topic) + '/timer/' + enc(t.id)))))),
      timers.next_cursor ? h('p', {class: 'muted'}, 'Showing the first 50; find a timer by id above.') : null,
    ];
  };
  return page;
}

// chart draws the timeline as SVG bars, one per bucket.
function chart(tl) {
  const W = 1000, H = 170, top = 10, bottom = 22, left = 40;
  const n = tl.counts.length;
  const maxC = Math.max(1, ...tl.counts);
  const bw = (W - left) / n;
  const svg = s('svg', {viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': 'timers due per bucket', id: 'timeline'});
  const y = (c) => top + (H - top - bottom) * (1 - c / maxC);
  svg.append(s('line', {x1: left, x2: W, y1: H - bottom, y2: H - bottom}));
  svg.append(s('text', {x: 2, y: top + 8}, String(maxC)));
  svg.append(s('text', {x: 2, y: H - bottom}, '0'));
  const start = new Date(tl.start).getTime();
  const stepMs = tl.step_sec * 1000;
  const every = Math.ceil(n / 8);
  tl.counts.forEach((c, i) => {
    const from = new Date(start + i * stepMs);
    const label = stepMs >= 86400e3 ? from.toISOString().slice(5, 10) : from.toISOString().slice(11, 16);
    if (c > 0) {
      const r = s('rect', {class: 'bar', x: left + i * bw + 1, y: y(c), width: Math.max(1, bw - 2), height: H - bottom - y(c), 'data-count': c});
      r.append(s('title', {}, `${c} due from ${from.toISOString().replace('T', ' ').slice(0, 16)} UTC`));
      svg.append(r);
    }
    if (i % every === 0) svg.append(s('text', {x: left + i * bw, y: H - 6}, label));
  });
  return svg;
}

function timerPage(topic, id) {
  return {
    async load() {
      try {
        return {timer: await api('GET', timerPath(topic, id))};
      } catch (e) {
        if (e.status === 404) return {timer: null};
        throw e;
      }
    },
    draw({timer}) {
      const back = h('p', {}, h('a', {href: '#/topic/' + enc(topic)}, '← ' + esc(topic)));
      if (!timer) {
        return [back, h('h1', {}, esc(id)),
          h('p', {id: 'gone', class: 'card'}, 'This timer is not scheduled: it fired, was cancelled, or never existed. ',
            h('a', {href: '#/topic/' + enc(topic) + '/dead'}, 'See the dead letters.'))];
      }
      const cancel = h('button', {id: 'cancel', class: 'danger', onclick: async () => {
        if (!await confirmDialog('Cancel this timer?', h('p', {}, 'Timer ', h('code', {}, esc(id)), ' of ', h('code', {}, esc(topic)), ' will be deleted and never fire.'), 'Cancel timer')) return;
        try {
          await api('DELETE', timerPath(topic, id));
          flash('Cancelled ' + esc(id) + '.');
          location.hash = '#/topic/' + enc(topic);
        } catch (e) { flash('Cancel failed: ' + e.message, true); }
      }}, 'Cancel…');
      const fire = h('button', {id: 'fire', class: 'primary', disabled: timer.state === 'leased', onclick: async () => {
        try {
          const r = await api('POST', timerPath(topic, id) + '/fire');
          flash('Fired ' + esc(id) + ' (due ' + fmtTime(r.due_at) + ').');
          refresh();
        } catch (e) { flash('Fire now failed: ' + e.message, true); }
      }}, 'Fire now');
      const headers = Object.entries(timer.headers || {});
      const r = timer.recurring;
      return [back, h('h1', {id: 'timer-id'}, esc(id), ' ', stateOf(timer), r ? [' ', scheduleState(timer)] : null),
        h('div', {class: 'actions'}, fire, r ? pauseButton(topic, timer, {id: r.paused ? 'resume' : 'pause'}) : null, cancel),
        r ? h('div', {class: 'card'}, h('dl', {id: 'recurring'},
          h('dt', {}, 'schedule'), h('dd', {id: 'schedule'}, esc(r.schedule)),
          h('dt', {}, 'missed ticks'), h('dd', {}, esc(r.missed)),
          r.jitter ? [h('dt', {}, 'jitter'), h('dd', {}, esc(r.jitter))] : null,
          h('dt', {}, 'next tick'), h('dd', {id: 'next-tick'}, '#' + r.tick + ' at ' + fmtTime(r.tick_at), ' ',
            h('span', {class: 'muted'}, r.paused ? '(held while paused)' : '(' + fmtIn(r.tick_at) + ')')),
          h('dt', {}, 'last tick'), h('dd', {id: 'last-tick'}, lastTick(r)))) : null,
        h('div', {class: 'card'}, h('dl', {id: 'timer'},
          h('dt', {}, 'topic'), h('dd', {}, esc(topic)),
          h('dt', {}, 'due'), h('dd', {}, fmtTime(timer.due_at), ' ', h('span', {class: 'muted'}, '(' + fmtIn(timer.due_at) + ')')),
          h('dt', {}, 'state'), h('dd', {}, timer.state, timer.lease_until ? ' until ' + fmtTime(timer.lease_until) : ''),
          h('dt', {}, 'attempt'), h('dd', {}, timer.attempt),
          timer.last_error ? [h('dt', {}, 'last error'), h('dd', {class: 'bad', id: 'last-error'}, esc(timer.last_error))] : null,
          h('dt', {}, 'correlation id'), h('dd', {id: 'correlation-id'}, esc(timer.correlation_id)),
          h('dt', {}, 'content type'), h('dd', {}, esc(timer.content_type) || '—'),
          h('dt', {}, 'headers'), h('dd', {}, headers.length ? h('pre', {id: 'headers'}, headers.map(([k, v]) => esc(k) + ': ' + esc(v)).join('\n')) : '—'),
          h('dt', {}, 'body'), h('dd', {}, h('pre', {id: 'body'}, fmtBody(timer, true))))),
      ];
    },
  };
}

// deadLetterPage is one dead letter with its whole body (the list shows
// the first KiB).
function deadLetterPage(topic, id) {
  return {
    async load() {
      try {
        return {dead: await api('GET', deadPath(topic, id))};
      } catch (e) {
        if (e.status === 404) return {dead: null};
        throw e;
      }
    },
    draw({dead}) {
      const back = h('p', {}, h('a', {href: '#/topic/' + enc(topic) + '/dead'}, '← dead letters of ' + esc(topic)));
      if (!dead) {
        return [back, h('h1', {}, esc(id)),
          h('p', {id: 'gone', class: 'card'}, 'This dead letter is gone: it was replayed or purged, or never existed.')];
      }
      const headers = Object.entries(dead.headers || {});
      return [back, h('h1', {id: 'dead-id'}, esc(id), ' ', h('span', {class: 'pill dead'}, esc(dead.reason))),
        h('div', {class: 'card'}, h('dl', {id: 'dead-letter'},
          h('dt', {}, 'topic'), h('dd', {}, esc(topic)),
          h('dt', {}, 'died'), h('dd', {}, fmtTime(dead.died_at)),
          h('dt', {}, 'was due'), h('dd', {}, fmtTime(dead.due_at)),
          h('dt', {}, 'attempts'), h('dd', {}, dead.attempt),
          dead.last_error ? [h('dt', {}, 'last error'), h('dd', {class: 'bad'}, esc(dead.last_error))] : null,
          h('dt', {}, 'correlation id'), h('dd', {}, esc(dead.correlation_id)),
          h('dt', {}, 'content type'), h('dd', {}, esc(dead.content_type) || '—'),
          h('dt', {}, 'headers'), h('dd', {}, headers.length ? h('pre', {}, headers.map(([k, v]) => esc(k) + ': ' + esc(v)).join('\n')) : '—'),
          h('dt', {}, 'body'), h('dd', {}, h('pre', {id: 'body'}, fmtBody(dead, true))))),
      ];
    },
  };
}

function deadPage(topic) {
  const page = {selected: new Set()};
  page.load = async () => api('GET', topicPath(topic) + '/dead?limit=200&body_limit=' + BODY_LIMIT);
  page.draw = (pg) => {
    const ids = pg.dead.map((d) => d.id);
    for (const id of [...page.selected]) if (!ids.includes(id)) page.selected.delete(id);
    const act = async (verb, all) => {
      const sel = [...page.selected];
      const what = all ? 'every dead letter of ' + esc(topic) : sel.length + ' dead letter' + (sel.length === 1 ? '' : 's');
      const n = pg.next_cursor ? 'more than ' + ids.length : String(ids.length);
      const body = all ? h('p', {}, 'Every dead letter of ' + esc(topic) + ' (' + n + ') will be ' + (verb === 'replay' ? 'scheduled again, due now.' : 'deleted for good.'))
        : [h('p', {}, verb === 'replay' ? 'These will be scheduled again, due now:' : 'These will be deleted for good:'), h('pre', {id: 'confirm-ids'}, sel.map((i) => esc(i)).join('\n'))];
      const ok = await confirmDialog((verb === 'replay' ? 'Replay ' : 'Purge ') + what + '?', body,
        verb === 'replay' ? 'Replay' : 'Purge', all ? topic : undefined);
      if (!ok) return;
      try {
        const r = await api('POST', topicPath(topic) + '/dead:' + verb, all ? {all: true} : {ids: sel});
        page.selected.clear();
        flash((verb === 'replay' ? 'Replayed ' : 'Purged ') + r.count + '.');
        refresh();
      } catch (e) { flash(verb + ' failed: ' + e.message, true); }
    };
    const none = page.selected.size === 0;
    const checkAll = h('input', {type: 'checkbox', id: 'select-all', 'aria-label': 'select all', checked: ids.length > 0 && page.selected.size === ids.length,
      onchange: (e) => { if (e.target.checked) ids.forEach((i) => page.selected.add(i)); else page.selected.clear(); draw(); }});
    return [
      h('p', {}, h('a', {href: '#/topic/' + enc(topic)}, '← ' + esc(topic))),
      h('h1', {}, 'Dead letters ', h('small', {}, esc(topic))),
      h('div', {class: 'actions'},
        h('button', {id: 'replay', class: 'primary', disabled: none, onclick: () => act('replay', false)}, 'Replay selected'),
        h('button', {id: 'purge', class: 'danger', disabled: none, onclick: () => act('purge', false)}, 'Purge selected'),
        h('span', {class: 'muted'}, page.selected.size + ' selected'),
        h('button', {id: 'replay-all', disabled: ids.length === 0, onclick: () => act('replay', true)}, 'Replay all…'),
        h('button', {id: 'purge-all', disabled: ids.length === 0, onclick: () => act('purge', true)}, 'Purge all…')),
      pg.dead.length === 0 ? h('p', {class: 'muted', id: 'no-dead'}, 'No dead letters.') :
        h('table', {id: 'dead'},
          h('thead', {}, h('tr', {}, h('th', {}, checkAll), h('th', {}, 'id'), h('th', {}, 'died'), h('th', {}, 'reason'),
            h('th', {class: 'num'}, 'attempts'), h('th', {}, 'error'), h('th', {}, 'body'))),
          h('tbody', {}, pg.dead.map((d) => h('tr', {'data-id': d.id},
            h('td', {}, h('input', {type: 'checkbox', 'aria-label': 'select ' + esc(d.id), checked: page.selected.has(d.id),
              onchange: (e) => { if (e.target.checked) page.selected.add(d.id); else page.selected.delete(d.id); draw(); }})),
            h('td', {class: 'id'}, esc(d.id)), h('td', {}, fmtTime(d.died_at)), h('td', {}, h('span', {class: 'pill dead'}, esc(d.reason))),
            h('td', {class: 'num'}, d.attempt), h('td', {class: 'bad error'}, esc(d.last_error || '')),
            bodyCell(d, '#/topic/' + enc(topic) + '/dead/' + enc(d.id)))))),
      pg.next_cursor ? h('p', {class: 'muted'}, 'Showing the oldest 200.') : null,
    ];
  };
  return page;
}

// ---- router and refresh loop ----

let current = null; // {key, page, data}
let timer = 0;
let seq = 0;

function parseHash() {
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  if (parts[0] === 'topic' && parts[1]) {
    if (parts[2] === 'timer' && parts.length >= 4) return {key: location.hash, make: () => timerPage(parts[1], parts.slice(3).join('/'))};
    if (parts[2] === 'dead' && parts.length >= 4) return {key: location.hash, make: () => deadLetterPage(parts[1], parts.slice(3).join('/'))};
    if (parts[2] === 'dead') return {key: location.hash, make: () => deadPage(parts[1])};
    return {key: location.hash, make: () => topicPage(parts[1])};
  }
  return {key: '#/', make: topicsPage};
}

function draw() {
  if (!current || !current.data) return;
  const main = document.getElementById('main');
  const y = window.scrollY;
  // Keep the focus (and the caret of a text field) across the redraw.
  const active = document.activeElement;
  const focusID = active && main.contains(active) ? active.id : '';
  const caret = focusID && typeof active.selectionStart === 'number' ? [active.selectionStart, active.selectionEnd] : null;
  main.replaceChildren(...[].concat(current.page.draw(current.data)).filter(Boolean));
  window.scrollTo(0, y);
  const again = focusID && document.getElementById(focusID);
  if (again) {
    again.focus();
    if (caret && again.setSelectionRange) again.setSelectionRange(caret[0], caret[1]);
  }
}

async function refresh() {
  clearTimeout(timer);
  const my = ++seq;
  const live = document.getElementById('live');
  if (current && !document.hidden && !document.getElementById('confirm').open && !document.getElementById('login').open) {
    try {
      const data = await current.page.load();
      if (my !== seq) return;
      current.data = data;
      draw();
      live.className = 'live';
      live.textContent = 'live · ' + new Date().toISOString().slice(11, 19) + ' UTC';
    } catch (e) {
      if (my !== seq) return;
      live.className = 'live stale';
      live.textContent = 'offline';
      if (e.status !== 401 && !current.data) {
        document.getElementById('main').replaceChildren(h('p', {class: 'bad'}, 'Cannot load: ' + e.message));
      }
    }
  }
  if (my === seq) timer = setTimeout(refresh, REFRESH_MS);
}

function route() {
  const r = parseHash();
  if (!current || current.key !== r.key) {
    current = {key: r.key, page: r.make(), data: null};
    document.getElementById('main').replaceChildren(h('p', {class: 'muted'}, 'Loading…'));
  }
  refresh();
}

function init() {
  document.getElementById('logout').hidden = !localStorage.getItem(TOKEN_KEY);
  document.getElementById('logout').onclick = () => {
    localStorage.removeItem(TOKEN_KEY);
    document.getElementById('logout').hidden = true;
    route();
  };
  document.getElementById('search').onsubmit = (e) => {
    e.preventDefault();
    const topic = document.getElementById('search-topic').value.trim();
    const id = document.getElementById('search-id').value.trim();
    if (!topic) { flash('Give the topic of the timer (ids are per topic).', true); return; }
    location.hash = id ? '#/topic/' + enc(topic) + '/timer/' + enc(id) : '#/topic/' + enc(topic);
  };
  document.getElementById('search-topic').onfocus = () => {
    document.getElementById('topic-names').replaceChildren(...topicNames.map((t) => h('option', {value: t})));
  };
  const cur = parseHash();
  if (cur.key.startsWith('#/topic/')) {
    const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
    document.getElementById('search-topic').value = parts[1];
  }
  window.addEventListener('hashchange', route);
  document.addEventListener('visibilitychange', () => { if (!document.hidden) refresh(); });
  route();
}

init();
