// Loom inspector: acting on the running app (loom inspect --app) — the
// Actions panel of the execution view. Loaded after app.js, whose helpers
// ($, el, execLink) and view it uses, with panes.js's ENDED_STATUSES. At
// load it asks api/session; when the inspector acts, it puts the panel
// right after #pending and keeps it on the selected execution and the
// slider's sequence by observing what app.js sets: #state-pane's
// data-execution and data-seq, #pending and the header's status. Every request carries the session's
// CSRF token (X-Loom-CSRF) and Content-Type: application/json.
//
// The page never checks an answer against the gate's JSON Schema: the app
// does, and its refusal (message, code and data: which field failed) is
// shown next to the form, which keeps what was typed.
//
// Its names live in one function scope, so they never collide with the
// other scripts' globals.
'use strict';

(() => {
  const acting = {
    on: false,
    csrf: '',
    id: null,        // the execution the panel's forms are for
    answerKey: '',   // the park the answer form is for (execution, gate, since)
    resolveKey: '',  // the in-doubt park the resolve form is for
    fields: 0,       // ids of generated fields
  };

  // actRequest calls the inspector's API: a JSON body for a POST; a refusal
  // throws an Error with its HTTP status and, when the app refused, its wire
  // code and data.
  async function actRequest(path, method, body) {
    const resp = await fetch('api/' + path, {
      method,
      credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json', 'X-Loom-CSRF': acting.csrf, Accept: 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const out = await resp.json().catch(() => ({ error: resp.status + ' ' + resp.statusText }));
    if (!resp.ok) {
      const err = new Error(out.error || resp.statusText);
      err.status = resp.status;
      err.code = out.code;
      err.data = out.data;
      throw err;
    }
    return out;
  }

  // ---- alerts and results ---------------------------------------------------

  function alertBox() {
    return el('div', { class: 'act-alert', role: 'alert', tabIndex: -1, hidden: true });
  }

  // showRefusal puts a refusal in a form's alert and moves the focus there:
  // the message, the app's code, each schema violation (where and what), and
  // the app's data as it sent it.
  function showRefusal(box, err) {
    const parts = [el('p', { class: 'act-error' }, el('strong', { text: 'Refused' }),
      err.code !== undefined && err.code !== null ? ' (code ' + err.code + ')' : '', ': ', String(err.message || err))];
    const d = err.data;
    if (d && Array.isArray(d.violations) && d.violations.length) {
      parts.push(el('ul', { class: 'act-violations' }, ...d.violations.map((v) => el('li', { 'data-pointer': v.pointer },
        el('code', { text: v.pointer }), ' ' + v.message + ' ', el('span', { class: 'muted', text: '(' + v.keyword + ')' })))));
    }
    if (d !== undefined && d !== null) {
      parts.push(el('details', { class: 'act-data' }, el('summary', { text: 'what the app sent (data)' }),
        el('pre', { text: JSON.stringify(d, null, 2) })));
    }
    box.replaceChildren(...parts);
    box.dataset.code = err.code !== undefined && err.code !== null ? String(err.code) : '';
    box.hidden = false;
    box.focus();
  }

  function clearAlert(box) {
    box.hidden = true;
    box.replaceChildren();
    delete box.dataset.code;
  }

  // said tells what an action did, in the panel's status line (it outlives
  // the form, which goes once the log moves on).
  function said(...nodes) {
    const s = $('#act-status');
    s.replaceChildren(...nodes);
    s.hidden = false;
  }

  // submitting runs an action from form: its alert cleared, its button busy,
  // a refusal shown in the alert. send returns the request's promise, or
  // throws to refuse before anything is sent.
  function submitting(form, box, send, done) {
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      clearAlert(box);
      let pending;
      try {
        pending = send();
      } catch (err) {
        showRefusal(box, err);
        return;
      }
      const buttons = form.querySelectorAll('button[type="submit"]');
      buttons.forEach((b) => { b.disabled = true; });
      form.setAttribute('aria-busy', 'true');
      pending.then(done, (err) => showRefusal(box, err)).finally(() => {
        buttons.forEach((b) => { b.disabled = false; });
        form.removeAttribute('aria-busy');
      });
    });
  }

  // parseJSON reads a JSON text field; blank is absent (undefined).
  function parseJSON(text, what) {
    if (!text.trim()) return undefined;
    try {
      return JSON.parse(text);
    } catch (e) {
      throw new Error(what + ' is not JSON (' + e.message + '); nothing was sent');
    }
  }

  // ---- a form from a JSON Schema ---------------------------------------------

  // fieldFor builds the control of a value the schema s describes, at
  // pointer (a JSON pointer into the answer), labelled name: an enum is a
  // select, a string a text input, a number or integer a number input, a
  // boolean a checkbox, an object with properties a fieldset of its own
  // fields; anything else (arrays, oneOf, …) a JSON textarea. It returns
  // {node, read, fill}: read() is {has, value} (has false: leave it out),
  // fill(v) shows v.
  function fieldFor(s, name, pointer, required) {
    s = s && typeof s === 'object' ? s : {};
    const id = 'act-f-' + (++acting.fields);
    const label = (extra) => el('label', { for: id }, name, required ? el('span', { class: 'act-required', text: ' (required)' }) : null, extra || null);
    const req = required ? 'true' : undefined;
    const combined = ['oneOf', 'anyOf', 'allOf', 'not', '$ref', 'if'].some((k) => s[k] !== undefined);
    if (Array.isArray(s.enum) && !combined) {
      const sel = el('select', { id, name: pointer, 'data-field': pointer, 'aria-required': req },
        el('option', { value: '', text: '— choose —' }),
        ...s.enum.map((v, i) => el('option', { value: String(i), text: typeof v === 'string' ? v : JSON.stringify(v) })));
      return {
        node: el('div', { class: 'act-field' }, label(), sel),
        read: () => (sel.value === '' ? { has: false } : { has: true, value: s.enum[Number(sel.value)] }),
        fill: (v) => {
          const i = s.enum.findIndex((x) => JSON.stringify(x) === JSON.stringify(v));
          sel.value = i < 0 ? '' : String(i);
        },
      };
    }
    if (!combined && (s.type === 'string' || s.type === 'number' || s.type === 'integer')) {
      const number = s.type !== 'string';
      const input = el('input', { id, name: pointer, 'data-field': pointer, 'aria-required': req, type: number ? 'number' : 'text',
        step: s.type === 'integer' ? '1' : number ? 'any' : undefined, autocomplete: 'off' });
      return {
        node: el('div', { class: 'act-field' }, label(), input),
        read: () => {
          if (input.value === '') {
            if (number && input.validity && input.validity.badInput) throw new Error(name + ' is not a number; nothing was sent');
            return required && !number ? { has: true, value: '' } : { has: false };
          }
          return { has: true, value: number ? Number(input.value) : input.value };
        },
        fill: (v) => { input.value = v === undefined || v === null ? '' : String(v); },
      };
    }
    if (!combined && s.type === 'boolean') {
      const box = el('input', { id, name: pointer, 'data-field': pointer, 'aria-required': req, type: 'checkbox' });
      return {
        node: el('div', { class: 'act-field act-check' }, box, label()),
        read: () => ({ has: true, value: box.checked }),
        fill: (v) => { box.checked = v === true; },
      };
    }
    if (!combined && s.type === 'object' && s.properties && typeof s.properties === 'object') {
      const need = Array.isArray(s.required) ? s.required : [];
      const kids = Object.keys(s.properties).map((k) => [k, fieldFor(s.properties[k], k, pointer + '/' + k.replace(/~/g, '~0').replace(/\//g, '~1'), need.includes(k))]);
      const legend = el('legend', {}, name, required && pointer !== '' ? el('span', { class: 'act-required', text: ' (required)' }) : null);
      return {
        node: el('fieldset', { class: 'act-object', 'data-field': pointer || undefined }, legend, ...kids.map(([, f]) => f.node)),
        read: () => {
          const out = {};
          let any = false;
          for (const [k, f] of kids) {
            const r = f.read();
            if (r.has) { out[k] = r.value; any = true; }
          }
          return { has: any || required, value: out };
        },
        fill: (v) => { for (const [k, f] of kids) f.fill(v && typeof v === 'object' ? v[k] : undefined); },
      };
    }
    const area = el('textarea', { id, name: pointer, 'data-field': pointer, 'aria-required': req, rows: 3, spellcheck: false });
    return {
      node: el('div', { class: 'act-field' }, label(el('span', { class: 'muted', text: ' (JSON)' })), area),
      read: () => {
        const v = parseJSON(area.value, name);
        return v === undefined ? { has: false } : { has: true, value: v };
      },
      fill: (v) => { area.value = v === undefined ? '' : JSON.stringify(v, null, 2); },
    };
  }

  // rootFields is the form of a whole answer: the schema's properties when it
  // describes an object with some, else one JSON field.
  function rootFields(schema) {
    const s = schema && typeof schema === 'object' ? schema : {};
    if (s.type === 'object' && s.properties && typeof s.properties === 'object' && !['oneOf', 'anyOf', 'allOf', 'not', '$ref', 'if'].some((k) => s[k] !== undefined)) {
      const f = fieldFor(Object.assign({}, s), 'answer', '', true);
      f.node.classList.add('act-root');
      return f;
    }
    return fieldFor({}, 'answer', '', false);
  }

  // ---- answering a gate -------------------------------------------------------

  function answerForm(id, on, gate) {
    const schema = gate && gate.schema;
    const box = alertBox();
    const fields = rootFields(schema);
    const rawId = 'act-raw-' + (++acting.fields);
    const areaId = 'act-raw-json-' + acting.fields;
    const raw = el('input', { type: 'checkbox', id: rawId, class: 'act-raw-toggle' });
    const area = el('textarea', { id: areaId, class: 'act-raw-json', rows: 6, spellcheck: false });
    const rawBox = el('div', { class: 'act-field act-raw', hidden: true }, el('label', { for: areaId, text: 'the answer as JSON' }), area);
    raw.addEventListener('change', () => {
      clearAlert(box);
      if (raw.checked) {
        try {
          const r = fields.read();
          area.value = r.has ? JSON.stringify(r.value, null, 2) : '';
        } catch (_) {
          // a field that is not JSON: the raw text starts blank
        }
      } else {
        try {
          fields.fill(parseJSON(area.value, 'the answer'));
        } catch (err) {
          raw.checked = true;
          showRefusal(box, err);
          return;
        }
      }
      rawBox.hidden = !raw.checked;
      fields.node.hidden = raw.checked;
    });
    const note = schema ? 'the app checks the answer against the gate\'s JSON Schema' : 'the flow declares no schema for this gate';
    const form = el('form', { id: 'act-answer-form', class: 'act-form', noValidate: true, 'aria-labelledby': 'act-answer-title', 'data-gate': on },
      el('h4', { id: 'act-answer-title' }, 'Answer gate ', el('code', { text: on })),
      el('p', { class: 'muted', text: note + (gate && gate.wakeAt !== undefined ? '; it times out at ' + new Date(gate.wakeAt).toISOString() : '') }),
      fields.node,
      el('div', { class: 'act-field act-check' }, raw, el('label', { for: rawId, text: 'raw JSON' })),
      rawBox,
      el('div', { class: 'act-buttons' }, el('button', { type: 'submit', text: 'Answer ' + on })),
      box);
    submitting(form, box, () => {
      let payload;
      if (raw.checked) payload = parseJSON(area.value, 'the answer');
      else {
        const r = fields.read();
        payload = r.has ? r.value : undefined;
      }
      const body = { id, eventType: on };
      if (payload !== undefined) body.payload = payload;
      return actRequest('act/resume', 'POST', body);
    }, () => said('answered gate ', el('code', { text: on }), ' of ', execLink(id), ': the app recorded it, and the execution goes on'));
    return form;
  }

  // renderAnswer shows the answer form of the park the execution is on,
  // when it is a flow's gate; it is built once per park, so what was typed
  // stays while the log does not move.
  function renderAnswer(id, park) {
    const key = park && typeof park.on === 'string' && !park.on.startsWith('__loom_') ? [id, park.on, park.seq].join('\n') : '';
    if (key === acting.answerKey) return;
    acting.answerKey = key;
    const box = $('#act-answer');
    box.hidden = !key;
    if (!key) { box.replaceChildren(); return; }
    box.replaceChildren(el('p', { class: 'muted', text: 'reading the gate of ' + id + '…' }));
    actRequest('gate?' + new URLSearchParams({ id }).toString(), 'GET').then((g) => {
      if (acting.answerKey !== key) return;
      box.replaceChildren(answerForm(id, park.on, g.gate && g.gate.on === park.on ? g.gate : null));
    }, (err) => {
      if (acting.answerKey !== key) return;
      const a = alertBox();
      box.replaceChildren(a);
      showRefusal(a, err);
    });
  }

  // ---- resolving an in-doubt step --------------------------------------------

  function resolveForm(id, park) {
    const box = alertBox();
    const n = ++acting.fields;
    const done = el('input', { type: 'radio', name: 'act-verdict-' + n, id: 'act-done-' + n, value: 'done' });
    const rerun = el('input', { type: 'radio', name: 'act-verdict-' + n, id: 'act-rerun-' + n, value: 'rerun', checked: true });
    const output = el('textarea', { id: 'act-output-' + n, rows: 2, spellcheck: false });
    const form = el('form', { id: 'act-resolve-form', class: 'act-form', noValidate: true, 'aria-labelledby': 'act-resolve-title' },
      el('h4', { id: 'act-resolve-title' }, 'Resolve in doubt: step ', el('code', { text: park.stepId || '?' }), ' attempt ' + (park.attempt ?? '?')),
      el('p', { class: 'muted', text: 'its process stopped while it ran: look at the world first (the charge, the ticket), then say whether it acted' }),
      el('fieldset', {}, el('legend', { text: 'verdict' }),
        el('div', { class: 'act-check' }, rerun, el('label', { for: rerun.id, text: 'it did not act: run it again' })),
        el('div', { class: 'act-check' }, done, el('label', { for: done.id, text: 'it acted, with this output' }))),
      el('div', { class: 'act-field' }, el('label', { for: output.id }, 'its output ', el('span', { class: 'muted', text: '(JSON, with "it acted")' })), output),
      el('div', { class: 'act-buttons' }, el('button', { type: 'submit', text: 'Resolve' })),
      box);
    submitting(form, box, () => {
      const body = { id, stepId: park.stepId, attempt: park.attempt, done: done.checked };
      if (done.checked) {
        const v = parseJSON(output.value, 'the output');
        body.output = v === undefined ? null : v;
      }
      return actRequest('act/resolve', 'POST', body);
    }, () => said('resolved step ', el('code', { text: park.stepId }), ' of ', execLink(id), done.checked ? ': it acted' : ': it runs again'));
    return form;
  }

  function renderResolve(id, park) {
    const key = park && park.on === '__loom_indoubt__' ? [id, park.seq].join('\n') : '';
    if (key === acting.resolveKey) return;
    acting.resolveKey = key;
    const box = $('#act-resolve');
    box.hidden = !key;
    box.replaceChildren(...(key ? [resolveForm(id, park)] : []));
  }

  // ---- fork, cancel, resume as -------------------------------------------------

  function forkForm(id) {
    const box = alertBox();
    const n = ++acting.fields;
    const simulate = el('input', { type: 'checkbox', id: 'act-simulate-' + n, class: 'act-simulate', checked: true });
    const result = el('p', { class: 'act-result', id: 'act-fork-result' });
    const form = el('form', { id: 'act-fork', class: 'act-form', noValidate: true, 'aria-labelledby': 'act-fork-title' },
      el('h4', { id: 'act-fork-title' }, 'Fork at ', el('span', { class: 'act-at', text: '#' + view.seq })),
      el('div', { class: 'act-check' }, simulate, el('label', { for: simulate.id }, 'simulated ',
        el('span', { class: 'muted', text: '(steps with a simulation run it instead of acting)' }))),
      el('div', { class: 'act-buttons' }, el('button', { type: 'submit', class: 'act-fork-button', text: 'Fork at #' + view.seq })),
      box, result);
    submitting(form, box, () => {
      const at = Number($('#state-pane').dataset.seq);
      result.replaceChildren();
      return actRequest('act/fork', 'POST', { id, at, simulate: simulate.checked }).then((r) => [r, at]);
    }, ([r, at]) => {
      result.replaceChildren('forked at #' + at + (simulate.checked ? ' (simulated)' : '') + ' into ', execLink(r.executionId, 'open the fork ' + r.executionId));
      said('forked ', execLink(id), ' at #' + at + ' into ', execLink(r.executionId));
    });
    return form;
  }

  function cancelForm(id) {
    const box = alertBox();
    const n = ++acting.fields;
    const reason = el('input', { type: 'text', id: 'act-reason-' + n, class: 'act-reason', autocomplete: 'off', maxLength: 512 });
    const form = el('form', { id: 'act-cancel', class: 'act-form', noValidate: true, 'aria-labelledby': 'act-cancel-title' },
      el('h4', { id: 'act-cancel-title', text: 'Cancel' }),
      el('div', { class: 'act-field' }, el('label', { for: reason.id }, 'reason ', el('span', { class: 'muted', text: '(recorded)' })), reason),
      el('div', { class: 'act-buttons' }, el('button', { type: 'submit', class: 'act-danger', text: 'Cancel ' + id })),
      box);
    submitting(form, box, () => actRequest('act/cancel', 'POST', { id, reason: reason.value }),
      () => said('cancelled ', execLink(id), reason.value ? ': ' + reason.value : ''));
    return form;
  }

  function resumeAsForm(id) {
    const box = alertBox();
    const n = ++acting.fields;
    const flow = el('input', { type: 'text', id: 'act-flow-' + n, class: 'act-flow', autocomplete: 'off' });
    const input = el('textarea', { id: 'act-input-' + n, class: 'act-input', rows: 3, spellcheck: false });
    const form = el('form', { id: 'act-resume-as', class: 'act-form', noValidate: true, 'aria-labelledby': 'act-resume-as-title' },
      el('h4', { id: 'act-resume-as-title', text: 'Resume as' }),
      el('p', { class: 'muted', text: 're-open it onto a fixed flow, with a new input: a crashed execution is driven again, an ended one re-opened' }),
      el('div', { class: 'act-field' }, el('label', { for: flow.id }, 'flow id ', el('span', { class: 'muted', text: '(blank: its own)' })), flow),
      el('div', { class: 'act-field' }, el('label', { for: input.id }, 'new input ', el('span', { class: 'muted', text: '(JSON; blank: the recorded one)' })), input),
      el('div', { class: 'act-buttons' }, el('button', { type: 'submit', text: 'Resume as' })),
      box);
    submitting(form, box, () => {
      const body = { id };
      if (flow.value.trim()) body.flowId = flow.value.trim();
      const v = parseJSON(input.value, 'the new input');
      if (v !== undefined) body.input = v;
      return actRequest('act/resume-as', 'POST', body);
    }, () => said('resumed ', execLink(id), flow.value.trim() ? ' as ' + flow.value.trim() : ''));
    return form;
  }

  // ---- the panel ----------------------------------------------------------------

  function buildPanel() {
    const panel = el('section', { id: 'actions', 'aria-labelledby': 'actions-title', hidden: true },
      el('h3', { id: 'actions-title' }, 'Actions ', el('span', { class: 'muted', text: 'on the running app, which records or refuses each' })),
      el('p', { id: 'act-status', class: 'act-status', role: 'status', hidden: true }),
      el('div', { id: 'act-answer', hidden: true }),
      el('div', { id: 'act-resolve', hidden: true }),
      el('div', { id: 'act-forms' }));
    $('#pending').after(panel);
  }

  // refresh puts the panel on what the view shows: the selected execution,
  // its latest state (the gate it is parked on, whether it ended) and the
  // slider's sequence (where a fork starts).
  function refresh() {
    const panel = $('#actions');
    const pane = $('#state-pane');
    const id = view.selected;
    if (!panel || id === null || pane.dataset.execution !== id) {
      if (panel) panel.hidden = true;
      return;
    }
    panel.hidden = false;
    panel.dataset.execution = id;
    panel.dataset.seq = pane.dataset.seq;
    if (acting.id !== id) {
      acting.id = id;
      $('#act-status').hidden = true;
      $('#act-forms').replaceChildren(forkForm(id), cancelForm(id),
        el('details', { class: 'act-more' }, el('summary', { text: 'Resume as another flow or input' }), resumeAsForm(id)));
    }
    const at = '#' + pane.dataset.seq;
    panel.querySelectorAll('.act-at').forEach((n) => { n.textContent = at; });
    panel.querySelectorAll('.act-fork-button').forEach((n) => { n.textContent = 'Fork at ' + at; });
    const st = view.latest;
    $('#act-cancel').hidden = !st || ENDED_STATUSES.includes(st.status);
    const park = st && st.status === 'suspended' && st.variables ? st.variables._suspendedOn : null;
    renderAnswer(id, park || null);
    renderResolve(id, park || null);
  }

  async function initActions() {
    let s;
    try {
      s = await actRequest('session', 'GET');
    } catch (_) {
      return; // not logged in, or an inspector without this endpoint: read-only
    }
    if (!s.actions) return;
    acting.on = true;
    acting.csrf = s.csrf || '';
    document.body.dataset.actions = 'on';
    const note = $('#top .note');
    if (note) note.textContent = 'acting on the running app · every view is a fold of the event log';
    buildPanel();
    const watch = new MutationObserver(refresh);
    watch.observe($('#state-pane'), { attributes: true, attributeFilter: ['data-execution', 'data-seq'] });
    watch.observe($('#pending'), { attributes: true, attributeFilter: ['hidden', 'data-seq'] });
    watch.observe($('#exec-status'), { childList: true, characterData: true, subtree: true });
    refresh();
  }

  initActions();
})();
