// Live updates without a reload: poll the cursor feed <main data-feed> names; when it has
// news, fetch this same page as a fragment (X-Fragment: 1) and replace <main>'s content.
"use strict";
(function () {
  const main = document.querySelector("main[data-feed]");
  if (!main) return;
  const badge = document.getElementById("live");
  // the page's CSP nonce: a fragment's timeline <style> must carry it to apply here
  const script = document.querySelector("script[nonce]");
  const nonce = script ? script.nonce : "";
  let cursor = Number(main.dataset.cursor || "0");
  const every = 1000; // ms between polls

  async function refresh() {
    const answer = await fetch(location.href, {
      headers: { "X-Fragment": "1", "X-Nonce": nonce },
      credentials: "same-origin",
    });
    if (!answer.ok) return;
    // the boxes ticked for a comparison stay ticked across the refresh
    const ticked = [...main.querySelectorAll("input[type=checkbox]:checked")].map((b) => b.name + "\n" + b.value);
    main.innerHTML = await answer.text();
    for (const box of main.querySelectorAll("input[type=checkbox]")) {
      const at = ticked.indexOf(box.name + "\n" + box.value);
      if (at >= 0) { box.checked = true; ticked.splice(at, 1); } // as many as were ticked
    }
    document.dispatchEvent(new Event("srtd:refreshed")); // charts.js draws the new data
  }

  async function tick() {
    try {
      const answer = await fetch(main.dataset.feed + "?after=" + cursor, { credentials: "same-origin" });
      if (answer.ok) {
        const feed = await answer.json();
        if (badge) badge.hidden = false;
        if (feed.events.length) {
          cursor = feed.next;
          await refresh();
        }
        if (feed.more) { setTimeout(tick, 0); return; }
      } else if (badge) {
        badge.hidden = true;
      }
    } catch (err) {
      if (badge) badge.hidden = true; // the collector is restarting: try again
    }
    setTimeout(tick, every);
  }
  setTimeout(tick, every);
})();
