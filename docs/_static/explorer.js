// The head-ablation explorer: plain JavaScript over the JSON that docs/explorer/make_data.py wrote.
// Subset index m: bit j set = head j kept; loss[m], acc[m] were computed by mhattn for every m.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("mhattn-explorer-data").textContent);
  const bits = (m) => m.toString(2).split("1").length - 1;
  const fmt = (x) => Number(x).toPrecision(data.digits);
  const pct = (x) => (100 * x).toFixed(2) + "%";
  const el = (tag, attrs, text) => {
    const e = document.createElementNS(tag === "svg" || tag === "rect" || tag === "text" ? "http://www.w3.org/2000/svg" : "http://www.w3.org/1999/xhtml", tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  };

  function drawMap(svg, model, head) {
    const w = model.sample.attention[head], ids = model.sample.ids, T = ids.length, c = 16, o = 22;
    svg.replaceChildren();
    svg.setAttribute("viewBox", `0 0 ${o + T * c} ${o + T * c}`);
    ids.forEach((id, i) => {
      svg.append(el("text", { x: o + i * c + c / 2, y: o - 6, "text-anchor": "middle" }, id));
      svg.append(el("text", { x: o - 4, y: o + i * c + c / 2 + 4, "text-anchor": "end" }, id));
    });
    w.forEach((row, q) => row.forEach((v, k) => {
      const r = el("rect", { x: o + k * c, y: o + q * c, width: c - 1, height: c - 1, "fill-opacity": Math.max(v, 0.02).toFixed(3), class: "mx-cell" });
      r.append(el("title", {}, `query ${q} (token ${ids[q]}) -> key ${k} (token ${ids[k]}): ${v}`));
      svg.append(r);
    }));
  }

  // What the label under a head means: detect_roles (mhattn.heads.roles) compares two shares of the queries with
  // data.role_threshold; "other" is a head where neither reaches it.
  const thr = pct(data.role_threshold).replace(".00%", "%");
  function roleTitle(model, j) {
    const s = model.role_stats[j];
    return `role: ${model.roles[j]}. Largest weight at offset ${s.offset >= 0 ? "+" : ""}${s.offset} for ` +
      `${pct(s.offset_fraction)} of queries, on the sequence's rarest token for ${pct(s.rare_fraction)} (each held to ${thr})`;
  }
  function legend(model) {
    const other = model.roles.filter((r) => r === "other").length;
    return el("p", { class: "mx-legend", "data-role": "legend" },
      `The label under each head is its role by mhattn.heads.detect_roles: offset-1 or offset+1 (offset+k in ` +
      `general) when the head's largest weight falls that many tokens back or ahead for at least ${thr} of queries; ` +
      `rare when it falls on the ` +
      `sequence's rarest token for at least ${thr}; other when neither share reaches ${thr}, so detect_roles found ` +
      `no offset or rare-token role at its threshold. "other" does not mean the head does nothing: it may share a ` +
      `job with others or do it less often than ${thr} (hover over a head for its two shares). ` +
      `Here ${other} of ${model.num_heads} heads are other.`);
  }

  function build(root, name, model) {
    const h = model.num_heads, full = (1 << h) - 1;
    let mask = full, shown = 0;
    const single = Array.from({ length: h }, (_, j) => model.loss[full & ~(1 << j)] - model.loss[full]);
    const section = el("section", { class: "mx-model", "data-model": name });
    section.append(el("h2", {}, name), legend(model));
    const heads = el("div", { class: "mx-heads" });
    const buttons = single.map((_, j) => {
      const b = el("button", { type: "button", "data-model": name, "data-head": j, "aria-pressed": "true", title: roleTitle(model, j) });
      b.append(el("span", {}, `head ${j}`), el("small", {}, model.roles[j]));
      b.addEventListener("click", () => { mask ^= 1 << j; shown = j; update(); });
      heads.append(b);
      return b;
    });
    const rows = [["kept", "heads kept"], ["loss", "loss of this subset"], ["acc", "accuracy of this subset"],
      ["full", "full model (all 12 heads)"], ["additive", "additive expectation"], ["percentile", "among subsets of this size"]];
    const table = el("table", { class: "mx-stats" }), cells = {};
    for (const [role, label] of rows) {
      const tr = el("tr");
      cells[role] = el("td", { "data-role": role });
      tr.append(el("th", {}, label), cells[role]);
      table.append(tr);
    }
    const caption = el("p", { class: "mx-caption", "data-role": "map-caption" });
    const svg = el("svg", { class: "mx-map", "data-role": "map", role: "img" });
    section.append(heads, table, caption, svg);
    root.append(section);

    function update() {
      const kept = bits(mask), removed = h - kept;
      buttons.forEach((b, j) => b.setAttribute("aria-pressed", String(Boolean(mask & (1 << j)))));
      const same = model.loss.filter((_, m) => bits(m) === kept), loss = model.loss[mask];
      const lower = same.filter((x) => x < loss).length, ties = same.filter((x) => x === loss).length - 1;
      const additive = model.loss[full] + single.reduce((s, c, j) => (mask & (1 << j) ? s : s + c), 0);
      cells.kept.textContent = `${kept} of ${h}`;
      cells.loss.textContent = fmt(loss);
      cells.acc.textContent = pct(model.acc[mask]);
      cells.full.textContent = `loss ${fmt(model.loss[full])}, accuracy ${pct(model.acc[full])}`;
      cells.additive.textContent = `${fmt(additive)} (the full model's loss plus the single-head costs of the heads switched off)`;
      cells.percentile.textContent = same.length === 1 ? "the only subset of its size"
        : `${(100 * (lower + ties / 2) / (same.length - 1)).toFixed(1)} percentile: a lower loss than ${same.length - 1 - lower - ties}` +
          ` and a higher one than ${lower} of the other ${same.length - 1} subsets with ${removed} head${removed === 1 ? "" : "s"} removed`;
      caption.textContent = `Attention of head ${shown} (${model.roles[shown]}) on one evaluation sequence: rows are queries, columns keys, labelled by token id.`;
      drawMap(svg, model, shown);
    }
    update();
  }

  const root = document.getElementById("mhattn-explorer");
  for (const [name, model] of Object.entries(data.models)) build(root, name, model);
})();
