import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// The example kinds of `Jobs/kinds/`, run as users run them, against servers the tests start.
@Suite(.startsProcesses, .timeLimit(.minutes(2)))
struct KindExampleTests {
    /// A small server in Python over a folder: `http` (files as they are) or `gopher` (RFC 1436).
    final class PythonServer: @unchecked Sendable {
        let process: ChildProcess
        let port: Int

        static let script = #"""
            import http.server, os, socketserver, sys
            mode, folder = sys.argv[1], sys.argv[2]
            os.chdir(folder)
            class Gopher(socketserver.StreamRequestHandler):
                def handle(self):
                    selector = self.rfile.readline().decode().strip()
                    if selector == "":
                        menu = "0About\tabout.txt\tlocalhost\t70\r\n1Nothing\tnone\tlocalhost\t70\r\n"
                        self.wfile.write((menu + ".\r\n").encode())
                    elif os.path.isfile(selector):
                        self.wfile.write(open(selector, "rb").read())
                    else:
                        self.wfile.write(b"3'" + selector.encode() + b"' does not exist\terror\terror\t0\r\n.\r\n")
            class Quiet(http.server.SimpleHTTPRequestHandler):
                extensions_map = {".csv": "text/csv", ".xml": "application/rss+xml", ".atom": "application/atom+xml", "": "application/octet-stream"}
                def log_message(self, *args): pass
            socketserver.TCPServer.allow_reuse_address = True
            server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Gopher if mode == "gopher" else Quiet)
            print(server.server_address[1], flush=True)
            server.serve_forever()
            """#

        init(mode: String, folder: String) throws {
            process = try ChildProcess("/usr/bin/env", ["python3", "-c", Self.script, mode, folder], stdout: .pipe)
            var line = Data()
            while !line.contains(0x0A) {
                let chunk = process.output!.availableData
                if chunk.isEmpty { break }
                line += chunk
            }
            guard let port = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) else {
                process.terminate(grace: .zero)
                throw Workspace.Missing(what: "the Python \(mode) server did not start")
            }
            self.port = port
        }

        deinit { process.terminate(grace: .zero) }
    }

    static var kinds: String { "\(FileKindTests.jobs)/kinds" }

    @Test func theFeedKindReportsTitleAndItemsAndStartsOneImageJobPerEnclosure() async throws {
        let w = try Workspace()
        try FileManager.default.createDirectory(atPath: "\(w.root)/site", withIntermediateDirectories: true)
        w.write("site/news.xml", """
            <?xml version="1.0"?>
            <rss version="2.0"><channel><title>Harbour news</title>
              <item><title>One</title><enclosure url="\(w.base)/images/png.png" type="image/png" length="1"/></item>
              <item><title>Two</title><enclosure url="\(w.base)/images/jpeg-baseline.jpg" type="image/jpeg" length="1"/></item>
              <item><title>Three</title><enclosure url="\(w.base)/images/talk.mp3" type="audio/mpeg" length="1"/></item>
              <item><title>Four</title></item>
            </channel></rss>
            """)
        w.write("site/blog.atom", """
            <feed xmlns="http://www.w3.org/2005/Atom"><title>A blog</title>
              <entry><title>Hi</title><link rel="enclosure" type="image/gif" href="\(w.base)/images/gif.gif"/></entry>
            </feed>
            """)
        w.write("site/broken.xml", "<rss><channel><title>cut off")
        let server = try PythonServer(mode: "http", folder: "\(w.root)/site")
        let site = "http://127.0.0.1:\(server.port)"
        w.write("feeds.jsonl", """
            {"kind": "feed", "name": "news", "url": "\(site)/news.xml"}
            {"kind": "feed", "name": "blog", "url": "\(site)/blog.atom"}
            {"kind": "feed", "name": "broken", "url": "\(site)/broken.xml"}
            """)
        let result = try await w.run(["run", "feeds.jsonl", "--kinds", Self.kinds])
        #expect(result.status == 1, "\(result.stderr)")
        let news = try w.record("feed:news")
        #expect(news["status"] == .string("succeeded"), "\(JSONWriter.string(news))")
        #expect(news["details"]?["title"] == .string("Harbour news"))
        #expect(news["details"]?["items"] == .number(4))
        #expect(news["details"]?["children"]?["succeeded"] == .number(2), "\(JSONWriter.string(news))")
        #expect(news["output"] == .string("feeds/news.xml"))
        let blog = try w.record("feed:blog")
        #expect(blog["details"]?["title"] == .string("A blog") && blog["details"]?["items"] == .number(1))
        #expect(blog["details"]?["children"]?["succeeded"] == .number(1))
        #expect(try w.record("feed:broken")["error"]?.stringValue?.contains("not XML") == true)
    }

    @Test func theCSVKindCountsRowsAndColumns() async throws {
        let w = try Workspace()
        try FileManager.default.createDirectory(atPath: "\(w.root)/site", withIntermediateDirectories: true)
        w.write("site/ports.csv", "name,country,ships\nHamburg,DE,120\n\"Rotterdam, NL\",NL,300\nAntwerp,BE,90\n")
        w.write("site/ragged.csv", "a,b\n1,2\n3\n")
        let server = try PythonServer(mode: "http", folder: "\(w.root)/site")
        let site = "http://127.0.0.1:\(server.port)"
        w.write("tables.jsonl", """
            {"kind": "csv-table", "name": "ports", "url": "\(site)/ports.csv"}
            {"kind": "csv-table", "name": "raw", "header": false, "url": "\(site)/ports.csv"}
            {"kind": "csv-table", "name": "ragged", "url": "\(site)/ragged.csv"}
            {"kind": "csv-table", "name": "missing", "url": "\(site)/missing.csv"}
            """)
        let result = try await w.run(["run", "tables.jsonl", "--kinds", Self.kinds])
        #expect(result.status == 1, "\(result.stderr)")
        let ports = try w.record("csv:ports")
        #expect(ports["details"]?["rows"] == .number(3) && ports["details"]?["columns"] == .number(3), "\(JSONWriter.string(ports))")
        #expect(ports["details"]?["header"] == .array([.string("name"), .string("country"), .string("ships")]))
        let output = try #require(ports["output"]?.stringValue)
        #expect(output.hasPrefix("tables/"))
        #expect(w.payload(output) == Array("name,country,ships\nHamburg,DE,120\n\"Rotterdam, NL\",NL,300\nAntwerp,BE,90\n".utf8))
        #expect(try w.record("csv:raw")["details"]?["rows"] == .number(4))
        #expect(try w.record("csv:ragged")["error"] == .string("row 3 has 1 columns, but the table has 2"))
        #expect(try w.status("csv:missing") == "notFound", "the runner's fetch keeps its statuses")
    }

    @Test func theGopherKindSpeaksItsOwnProtocol() async throws {
        let w = try Workspace()
        try FileManager.default.createDirectory(atPath: "\(w.root)/hole", withIntermediateDirectories: true)
        w.write("hole/about.txt", "A gopher hole for tests.\r\n")
        let server = try PythonServer(mode: "gopher", folder: "\(w.root)/hole")
        let hole = "gopher://127.0.0.1:\(server.port)"
        // A port nobody listens on: bind one, note it, close it.
        let closed = try LoopbackPort.unused()
        w.write("items.jsonl", """
            {"kind": "gopher", "name": "menu", "url": "\(hole)/1"}
            {"kind": "gopher", "name": "about", "url": "\(hole)/0about.txt"}
            {"kind": "gopher", "name": "none", "url": "\(hole)/1none"}
            {"kind": "gopher", "name": "refused", "retries": 1, "url": "gopher://127.0.0.1:\(closed)/1"}
            """)
        let result = try await w.run(["run", "items.jsonl", "--kinds", Self.kinds])
        #expect(result.status == 1, "\(result.stderr)")
        let menu = try w.record("gopher:menu")
        #expect(menu["status"] == .string("succeeded"), "\(JSONWriter.string(menu))")
        #expect(menu["details"]?["entries"] == .number(2))
        #expect(w.payload("gopher/about.txt") == Array("A gopher hole for tests.\r\n".utf8))
        #expect(try w.record("gopher:about")["url"] == .string("\(hole)/0about.txt"))
        #expect(try w.status("gopher:none") == "notFound")
        let refused = try w.record("gopher:refused")
        #expect(refused["status"] == .string("failed") && refused["attempts"] == .number(2), "exit 75 is retried: \(JSONWriter.string(refused))")
        #expect(result.stderr.contains("gopher:refused: 127.0.0.1:\(closed):"), "\(result.stderr)")
    }
}
