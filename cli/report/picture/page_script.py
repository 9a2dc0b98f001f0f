"""The style sheet and script the HTML page carries inline (no network, no library).

The script ties each table row to its rectangle (hovering one highlights both; clicking a
rectangle scrolls to its row, clicking a row flashes its rectangle) and zooms each map by
its ``viewBox``: the wheel zooms around the pointer, a drag pans, the buttons zoom in, out
and back.
"""

CSS = """
body{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;margin:16px;color:#222}
h1{font-size:20px}h2{font-size:17px;margin-top:28px}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}
td.l,th.l{text-align:left}th{background:#eee;position:sticky;top:0}
.sw{display:inline-block;width:12px;height:12px;border:1px solid #555;vertical-align:middle}
tr.hl{background:#ffe08a}
svg .hl{stroke:#000!important;stroke-width:3px!important}
.viewport{border:1px solid #bbb;overflow:hidden;max-width:100%;cursor:grab}
.viewport svg{display:block;width:100%;height:auto}
.tools{margin:6px 0;font-size:12px}.tools button{margin-right:4px}
.scroll{max-height:480px;overflow:auto;display:inline-block}
.facts td{text-align:left;border:none;padding:1px 10px 1px 0}
"""

JS = """
(function(){
  function setup(sec){
    var svg = sec.querySelector('svg.map');
    function mark(i, on){
      sec.querySelectorAll('[data-i="' + i + '"]').forEach(function(e){
        e.classList.toggle('hl', on);
      });
    }
    sec.addEventListener('mouseover', function(ev){
      var t = ev.target.closest('[data-i]'); if (t) mark(t.getAttribute('data-i'), true);
    });
    sec.addEventListener('mouseout', function(ev){
      var t = ev.target.closest('[data-i]'); if (t) mark(t.getAttribute('data-i'), false);
    });
    sec.addEventListener('click', function(ev){
      var t = ev.target.closest('[data-i]'); if (!t) return;
      var i = t.getAttribute('data-i');
      if (t.tagName.toLowerCase() === 'tr') {
        mark(i, true); setTimeout(function(){ mark(i, false); }, 1200);
      } else {
        var row = sec.querySelector('tr[data-i="' + i + '"]');
        if (row) row.scrollIntoView({block: 'center'});
      }
    });
    if (!svg) return;
    var full = svg.getAttribute('viewBox').split(' ').map(Number);
    var vb = full.slice();
    function show(){ svg.setAttribute('viewBox', vb.join(' ')); }
    function zoom(f, cx, cy){
      var w = Math.min(full[2], Math.max(full[2] / 64, vb[2] * f));
      var h = w * full[3] / full[2];
      vb = [cx - (cx - vb[0]) * w / vb[2], cy - (cy - vb[1]) * h / vb[3], w, h];
      clamp(); show();
    }
    function clamp(){
      vb[0] = Math.min(Math.max(vb[0], full[0]), full[0] + full[2] - vb[2]);
      vb[1] = Math.min(Math.max(vb[1], full[1]), full[1] + full[3] - vb[3]);
    }
    function at(ev){
      var r = svg.getBoundingClientRect();
      return [vb[0] + (ev.clientX - r.left) * vb[2] / r.width,
              vb[1] + (ev.clientY - r.top) * vb[3] / r.height];
    }
    svg.addEventListener('wheel', function(ev){
      ev.preventDefault(); var p = at(ev); zoom(ev.deltaY < 0 ? 0.8 : 1.25, p[0], p[1]);
    }, {passive: false});
    var drag = null;
    svg.addEventListener('mousedown', function(ev){ drag = [ev.clientX, ev.clientY]; });
    window.addEventListener('mouseup', function(){ drag = null; });
    window.addEventListener('mousemove', function(ev){
      if (!drag) return;
      var r = svg.getBoundingClientRect();
      vb[0] -= (ev.clientX - drag[0]) * vb[2] / r.width;
      vb[1] -= (ev.clientY - drag[1]) * vb[3] / r.height;
      drag = [ev.clientX, ev.clientY]; clamp(); show();
    });
    sec.querySelectorAll('button[data-zoom]').forEach(function(b){
      b.addEventListener('click', function(){
        var z = b.getAttribute('data-zoom');
        if (z === 'reset') { vb = full.slice(); show(); return; }
        zoom(z === 'in' ? 0.5 : 2, vb[0] + vb[2] / 2, vb[1] + vb[3] / 2);
      });
    });
  }
  document.querySelectorAll('section.fn').forEach(setup);
})();
"""
