// The colour-contrast probe: evaluated by the engine on a page whose elements carry
// data-mp-line (their source line). Walks the visible text, takes each run's computed colour and
// the effective background behind it (semi-transparent layers blended up to the first opaque one,
// the white canvas below all), and computes the WCAG 2 contrast ratio. Text over a background
// image cannot be judged and is listed apart. Each distinct (line, colours) is reported once.
(() => {
  const parse = (css) => {
    const m = /rgba?\(([^)]*)\)/.exec(css || "");
    if (!m) return null;
    const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
    if (p.length < 3 || p.some(Number.isNaN)) return null;
    return { r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1 };
  };
  const over = (top, bottom) => ({
    r: top.r * top.a + bottom.r * (1 - top.a),
    g: top.g * top.a + bottom.g * (1 - top.a),
    b: top.b * top.a + bottom.b * (1 - top.a),
    a: 1,
  });
  const channel = (v) => {
    const s = v / 255;
    return s <= 0.04045 ? s / 12.92 : Math.pow((s + 0.055) / 1.055, 2.4);
  };
  const luminance = (c) =>
    0.2126 * channel(c.r) + 0.7152 * channel(c.g) + 0.0722 * channel(c.b);
  const hex = (c) =>
    "#" +
    [c.r, c.g, c.b]
      .map((v) => Math.round(v).toString(16).padStart(2, "0"))
      .join("");
  const lineOf = (el) => {
    const tagged = el.closest("[data-mp-line]");
    return tagged ? Number(tagged.getAttribute("data-mp-line")) : null;
  };
  const MAX = 200;
  const failures = [];
  const unjudged = [];
  const seen = new Set();
  let judged = 0;
  const root = document.body || document.documentElement;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    const text = node.textContent.replace(/\s+/g, " ").trim();
    const el = node.parentElement;
    if (!text || !el) continue;
    const tag = el.tagName.toLowerCase();
    if (tag === "script" || tag === "style" || tag === "title") continue;
    const style = getComputedStyle(el);
    if (
      style.visibility !== "visible" ||
      el.getClientRects().length === 0 ||
      el.checkVisibility && !el.checkVisibility({ opacityProperty: true })
    )
      continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    const box = range.getBoundingClientRect();
    if (box.width < 1 || box.height < 1) continue;
    const fg = parse(style.color);
    if (!fg) continue;
    const layers = [];
    let image = false;
    for (let e = el; e; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (s.backgroundImage && s.backgroundImage !== "none") {
        image = true;
        break;
      }
      const bg = parse(s.backgroundColor);
      if (bg && bg.a > 0) {
        layers.push(bg);
        if (bg.a >= 1) break;
      }
    }
    const line = lineOf(el);
    if (image) {
      const key = "img|" + line;
      if (!seen.has(key) && unjudged.length < MAX) {
        seen.add(key);
        unjudged.push({ line, text: text.slice(0, 80) });
      }
      continue;
    }
    let bg = { r: 255, g: 255, b: 255, a: 1 };
    for (let i = layers.length - 1; i >= 0; i--) bg = over(layers[i], bg);
    const shown = over(fg, bg);
    const l1 = luminance(shown);
    const l2 = luminance(bg);
    const ratio = (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05);
    const size = parseFloat(style.fontSize);
    const bold = parseInt(style.fontWeight, 10) >= 700;
    const required = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
    judged++;
    if (ratio >= required) continue;
    const key = line + "|" + hex(shown) + "|" + hex(bg);
    if (seen.has(key) || failures.length >= MAX) continue;
    seen.add(key);
    failures.push({
      line,
      text: text.slice(0, 80),
      foreground: hex(shown),
      background: hex(bg),
      ratio: Math.floor(ratio * 100) / 100,
      required,
    });
  }
  return { judged, failures, unjudged };
})()
