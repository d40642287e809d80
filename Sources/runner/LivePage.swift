import Foundation
import RunnerKit

/// The live page of `runner watch --listen`: one HTML document with its style, script and chart
/// inline (no external assets). Without scripts it is a snapshot (and reloads itself every 10 s);
/// with them it fetches its main part again whenever the event stream says something happened,
/// at most twice a second, and every 2 s for the ages.
enum LivePage {
    static let contentSecurityPolicy =
        "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    /// `counts`: what the feed counts (the spool's files, or the queue's jobs), label by label.
    static func page(_ snapshot: LiveBoard.Snapshot, overview: LiveOverview, hosts: [JobEngine.HostActivity]) -> String {
        """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>runner watch</title>
        <noscript><meta http-equiv="refresh" content="10"></noscript>
        <style>\(style)</style>
        </head><body>
        <header><h1>runner watch</h1><span id="live">snapshot</span></header>
        <main id="main">\(main(snapshot, overview: overview, hosts: hosts))</main>
        <script>\(script)</script>
        </body></html>

        """
    }

    /// The part the script fetches again (`/?part=main`).
    static func main(_ snapshot: LiveBoard.Snapshot, overview: LiveOverview, hosts: [JobEngine.HostActivity]) -> String {
        let counts = overview.counts
        let now = Date()
        var html = "<p class=\"since\">watching since \(escape(Timestamp.iso8601(snapshot.since))); shown at \(escape(Timestamp.iso8601(now)))</p>"

        // Counts.
        html += "<section><h2>Counts</h2><div class=\"counts\">"
        for (label, count) in counts { html += "<div><b>\(count)</b><span>\(label)</span></div>" }
        html += "</div><p class=\"jobs\">jobs since start: "
        html += JobStatus.allCases.map { "<span class=\"\($0.rawValue)\">\($0.rawValue) \(snapshot.counts[$0] ?? 0)</span>" }.joined(separator: " · ")
        html += "</p></section>"

        // Running jobs.
        html += "<section><h2>Running</h2>"
        if snapshot.running.isEmpty {
            html += "<p class=\"none\">No job is running.</p>"
        } else {
            html += "<table id=\"running\"><tr><th>key</th><th>kind</th><th>phase</th><th>age</th><th>url</th></tr>"
            for job in snapshot.running.prefix(200) {
                html += "<tr data-key=\"\(escape(job.key))\"><td>\(escape(job.key))</td><td>\(escape(job.kind))</td>"
                html += "<td class=\"phase\">\(escape(job.phase)) <small>(\(SpoolStatus.age(now.timeIntervalSince(job.phaseSince))))</small>"
                if let bytes = job.bytes { html += "<br><span class=\"bytes\">\(escape(Self.transfer(bytes: bytes, total: job.total, speed: job.bytesPerSecond)))</span>" }
                html += "</td>"
                html += "<td>\(SpoolStatus.age(now.timeIntervalSince(job.startedAt)))</td><td class=\"url\">\(escape(job.url))</td></tr>"
            }
            html += "</table>"
            if snapshot.running.count > 200 { html += "<p>… and \(snapshot.running.count - 200) more</p>" }
        }
        html += "</section>"

        // The fleet's other jobs (a queue's other watchers).
        if !overview.elsewhere.isEmpty {
            html += "<section><h2>Running elsewhere in the fleet</h2>"
            html += "<table id=\"fleet\"><tr><th>key</th><th>watcher</th><th>phase</th><th>age</th></tr>"
            for job in overview.elsewhere.prefix(200) {
                html += "<tr data-key=\"\(escape(job.key))\"><td>\(escape(job.key))</td><td>\(escape(job.runner))</td>"
                html += "<td class=\"phase\">\(escape(job.phase ?? "running"))</td><td>\(SpoolStatus.age(now.timeIntervalSince(job.startedAt)))</td></tr>"
            }
            html += "</table>"
            if overview.elsewhere.count > 200 { html += "<p>… and \(overview.elsewhere.count - 200) more</p>" }
            html += "</section>"
        }

        // Hosts.
        html += "<section><h2>Hosts</h2>"
        if hosts.isEmpty {
            html += "<p class=\"none\">No host contacted yet.</p>"
        } else {
            html += "<table id=\"hosts\"><tr><th>host</th><th>slots in use</th><th>waiting</th><th>pace</th></tr>"
            let (shown, more) = LiveSite.busiest(hosts)
            for host in shown {
                var pace = host.rate.map { String(format: "%g a second", $0) } ?? "unpaced"
                if host.pausedFor > .zero { pace += String(format: "; paused %.1f s more (Retry-After)", host.pausedFor.inSeconds) }
                html += "<tr><td>\(escape(host.host))</td><td>\(host.inUse) of \(host.limit)</td><td>\(host.waiting)</td><td>\(escape(pace))</td></tr>"
            }
            if more > 0 { html += "<tr><td colspan=\"4\">\(more) more host\(more == 1 ? "" : "s"), idle or less busy</td></tr>" }
            html += "</table>"
        }
        html += "</section>"

        // Throughput.
        html += "<section><h2>Finished per \(snapshot.spanSeconds) s, last \(snapshot.throughput.count * snapshot.spanSeconds / 60) minutes</h2>"
        html += chart(snapshot.throughput, spanSeconds: snapshot.spanSeconds) + "</section>"

        // Last finished.
        html += "<section><h2>Last finished</h2>"
        if snapshot.finished.isEmpty {
            html += "<p class=\"none\">No job has finished yet.</p>"
        } else {
            html += "<table id=\"finished\"><tr><th>key</th><th>kind</th><th>status</th><th>time</th><th>ended</th><th>error</th></tr>"
            for job in snapshot.finished {
                html += "<tr data-key=\"\(escape(job.key))\"><td>\(escape(job.key))</td><td>\(escape(job.kind))</td>"
                html += "<td class=\"\(job.status.rawValue)\">\(job.status.rawValue)</td><td>\(job.milliseconds) ms</td>"
                html += "<td>\(SpoolStatus.age(now.timeIntervalSince(job.finishedAt))) ago</td><td>\(escape(job.message ?? ""))</td></tr>"
            }
            html += "</table>"
        }
        html += "</section>"
        return html
    }

    /// Bars of jobs finished per span, the newest on the right.
    static func chart(_ counts: [Int], spanSeconds: Int) -> String {
        let (width, height, bar) = (600, 120, 10)
        let top = max(1, counts.max() ?? 0)
        var svg = "<svg id=\"throughput\" viewBox=\"0 0 \(width) \(height + 16)\" width=\"\(width)\" height=\"\(height + 16)\" role=\"img\" aria-label=\"jobs finished per \(spanSeconds) seconds\">"
        svg += "<line x1=\"0\" y1=\"\(height)\" x2=\"\(width)\" y2=\"\(height)\" class=\"axis\"/>"
        for (index, count) in counts.enumerated() where count > 0 {
            let h = max(1, count * (height - 10) / top)
            let age = (counts.count - 1 - index) * spanSeconds
            svg += "<rect x=\"\(index * bar + 1)\" y=\"\(height - h)\" width=\"\(bar - 2)\" height=\"\(h)\"><title>\(count) finished, \(age) s ago</title></rect>"
        }
        svg += "<text x=\"2\" y=\"10\">\(top)</text><text x=\"2\" y=\"\(height + 13)\">\(counts.count * spanSeconds / 60) min ago</text>"
        svg += "<text x=\"\(width - 2)\" y=\"\(height + 13)\" text-anchor=\"end\">now</text></svg>"
        return svg
    }

    /// "120 MiB of 1024 MiB, 48 MiB/s": a running transfer as the page shows it.
    static func transfer(bytes: Int, total: Int?, speed: Double?) -> String {
        var text = Console.size(bytes)
        if let total { text += " of " + Console.size(total) }
        if let speed { text += ", " + Console.size(Int(speed)) + "/s" }
        return text
    }

    /// The longest text the page shows of any one string (a key, a phase, an error, a host).
    static let maxTextBytes = 2048

    /// `text` for HTML, cut to `maxTextBytes` first.
    static func escape(_ text: String) -> String {
        let text = JSONValue.cut(text, toBytes: maxTextBytes)
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(character)
            }
        }
        return out
    }

    static let style = """
        body{font:14px/1.4 system-ui,sans-serif;margin:0 1.5em 2em;color:#222;background:#fafafa}
        header{display:flex;align-items:baseline;gap:1em}h1{font-size:1.4em}h2{font-size:1.05em;margin:1.2em 0 .4em}
        #live{font-size:.85em;color:#777}#live.on{color:#1a7f37}.since{color:#666;font-size:.85em}
        .counts{display:flex;gap:1em;flex-wrap:wrap}.counts div{background:#fff;border:1px solid #ddd;border-radius:6px;padding:.5em 1em;min-width:6em}
        .counts b{display:block;font-size:1.6em}.counts span{color:#666}
        table{border-collapse:collapse;background:#fff;max-width:100%}td,th{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}
        th{background:#f0f0f0}.url{max-width:28em;overflow-wrap:anywhere;color:#555}.none{color:#777}
        .succeeded,.notModified{color:#1a7f37}.failed,.timedOut,.offline,.notFound{color:#b42318}.cancelled,.duplicate{color:#9a6700}
        svg rect{fill:#3b82f6}svg .axis{stroke:#999}svg text{font-size:10px;fill:#666}
        """

    static let script = """
        (function(){
          var main=document.getElementById('main'),live=document.getElementById('live'),pending=false,last=0;
          function refresh(){
            pending=false;last=Date.now();
            fetch('?part=main',{cache:'no-store'}).then(function(r){if(!r.ok)throw r.status;return r.text();}).then(function(t){
              main.innerHTML=t;document.body.setAttribute('data-updated',new Date().toISOString());
            }).catch(function(){live.textContent='disconnected';live.className='';});
          }
          function soon(){if(pending)return;pending=true;setTimeout(refresh,Math.max(0,500-(Date.now()-last)));}
          if(window.EventSource){
            var events=new EventSource('api/events');
            events.onopen=function(){live.textContent='live';live.className='on';};
            events.onmessage=soon;
            events.onerror=function(){live.textContent='reconnecting';live.className='';};
          }
          setInterval(soon,2000);
          refresh();
        })();
        """
}
