import FixtureServer
import Foundation
import Glibc
import RunnerKinds
import RunnerKit
import RunnerTestSupport
import Testing

/// `runner run` end to end: the built binary, real HTTP against the fixture server, real files.
@Suite(.startsProcesses, .timeLimit(.minutes(2)))
struct RunTests {
    @Test func treeWithEntriesWritesRecordsPayloadsAndRunLog() async throws {
        let w = try Workspace()
        w.write("tree.json", #"{"kind": "tree", "key": "tree:t", "url": "\#(w.base)/data.json", "entries": "\#(w.base)/entries/{id}.json"}"#)
        let result = try await w.run(["run", "tree.json"])
        #expect(result.status == 0, "stderr: \(result.stderr)")

        let tree = try w.record("tree:t")
        #expect(tree["status"] == .string("succeeded"))
        #expect(tree["details"]?["nodes"]?.intValue == FixtureCatalog.treeNodeCount)
        #expect(tree["details"]?["leaves"]?.intValue == FixtureCatalog.treeLeafCount)
        #expect(tree["details"]?["depth"]?.intValue == FixtureCatalog.treeDepth)
        let missing = FixtureCatalog.missingEntryIDs.count
        #expect(tree["details"]?["children"] == .object([
            ("succeeded", JSONValue(FixtureCatalog.treeLeafCount - missing)), ("notFound", JSONValue(missing)),
        ]))
        let output = try #require(tree["output"]?.stringValue)
        let written = try #require(w.payload(output))
        #expect(tree["sha256"]?.stringValue == SHA256.hex(written), "sha256 is of the normalized file written, not of the body received")
        #expect(tree["bytes"]?.intValue == written.count)
        #expect(try Tree(JSONParser.parse(written)).leafIDs == FixtureCatalog.treeLeafIDs, "the normalized tree keeps every leaf")

        for id in FixtureCatalog.treeLeafIDs {
            let record = try w.record("entry:\(id)")
            if FixtureCatalog.missingEntryIDs.contains(id) {
                #expect(record["status"] == .string("notFound"))
                #expect(record["httpStatus"]?.intValue == 404)
                #expect(w.payload("entries/\(id).json") == nil)
            } else {
                #expect(record["status"] == .string("succeeded"))
                #expect(w.payload("entries/\(id).json") == Array(FixtureCatalog.entryJSON(id: id).utf8))
                #expect(record["parent"] == .string("tree:t"))
            }
        }
        let logs = w.outputFiles().filter { $0.hasPrefix("runs/") }
        #expect(logs.count == 1)
        let lines = try String(contentsOfFile: "\(w.out)/\(logs[0])", encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 1 + FixtureCatalog.treeLeafCount)
        #expect(w.leftovers().isEmpty)
    }

    @Test func everyImageFormatIsToldByItsBytes() async throws {
        let w = try Workspace()
        let jobs = FixtureCatalog.images.map { #"{"kind": "image", "key": "image:\#($0.name)", "url": "\#(w.base)/images/\#($0.name)"}"# }
        w.write("images.jsonl", jobs.joined(separator: "\n"))
        let result = try await w.run(["run", "images.jsonl"])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        for image in FixtureCatalog.images {
            let record = try w.record("image:\(image.name)")
            #expect(record["status"] == .string("succeeded"), "\(image.name): \(record["error"] ?? .null)")
            #expect(record["details"]?["format"] == .string(image.format))
            #expect(record["details"]?["width"]?.intValue == image.width)
            #expect(record["details"]?["height"]?.intValue == image.height)
            #expect(record["bytes"]?.intValue == image.bytes.count)
            let output = try #require(record["output"]?.stringValue)
            #expect(output.hasSuffix("." + (image.format == "jpeg" ? "jpg" : image.format)))
            #expect(w.payload(output) == image.bytes)
        }
    }

    @Test func whatIsNotAnImageFailsSayingWhatArrivedAndWritesNothing() async throws {
        let w = try Workspace()
        let png = "\(w.base)/images/png.png"
        w.write("bad.json", """
            [
              {"kind": "image", "key": "html", "url": "\(png)?html=1"},
              {"kind": "image", "key": "truncated", "url": "\(png)?truncate=20"},
              {"kind": "image", "key": "reset", "url": "\(png)?reset=1"},
              {"kind": "image", "key": "error", "url": "\(png)?status=500"},
              {"kind": "image", "key": "missing", "url": "\(w.base)/images/none.png"},
              {"kind": "image", "key": "json", "url": "\(w.base)/data.json"},
              {"kind": "image", "key": "ok", "url": "\(png)"}
            ]
            """)
        let result = try await w.run(["run", "bad.json"])
        #expect(result.status == 1)
        let html = try w.record("html")
        #expect(html["status"] == .string("failed"))
        #expect(html["error"]?.stringValue?.contains("HTML") == true, "\(html["error"] ?? .null)")
        #expect(try w.status("truncated") == "failed")
        #expect(try w.status("reset") == "failed")
        let error = try w.record("error")
        #expect(error["status"] == .string("failed"))
        #expect(error["httpStatus"]?.intValue == 500)
        #expect(try w.status("missing") == "notFound")
        #expect(try w.record("json")["error"]?.stringValue?.contains("JSON") == true)
        #expect(try w.status("ok") == "succeeded")
        #expect(w.outputFiles().filter { $0.hasPrefix("images/") } == ["images/ok.png"])
        #expect(w.leftovers().isEmpty)
    }

    @Test func imageListStartsOneImageJobPerElement() async throws {
        let w = try Workspace()
        w.write("list.json", #"{"kind": "image-list", "key": "list", "url": "\#(w.base)/images.json"}"#)
        let result = try await w.run(["run", "list.json", "--json"])
        #expect(result.status == 0, "a child's notFound does not fail its parent: \(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map { try? JSONParser.parse(String($0)) }
        #expect(lines.count == FixtureCatalog.images.count + 2, "one line per child and one for the list")
        let list = try w.record("list")
        #expect(list["details"]?["children"]?["succeeded"]?.intValue == FixtureCatalog.images.count)
        #expect(list["details"]?["children"]?["notFound"]?.intValue == 1)
        #expect(lines.compactMap { $0?["parent"]?.stringValue }.count == FixtureCatalog.images.count + 1)
    }

    @Test func redirectsFollowHTTPAndRefuseOtherSchemes() async throws {
        let w = try Workspace()
        let target = "\(w.base)/images/png.png".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        w.write("redirects.json", """
            [{"kind": "image", "key": "followed", "url": "\(w.base)/redirect?to=\(target)"},
             {"kind": "image", "key": "refused", "url": "\(w.base)/redirect?to=ftp%3A%2F%2Fexample.org%2Fx.png"}]
            """)
        let result = try await w.run(["run", "redirects.json"])
        #expect(result.status == 1)
        #expect(try w.status("followed") == "succeeded")
        let refused = try w.record("refused")
        #expect(refused["status"] == .string("failed"))
        #expect(refused["error"]?.stringValue?.contains("ftp") == true, "\(refused["error"] ?? .null)")
    }

    @Test(arguments: ["", "?chunked=1"])
    func maxBytesIsEnforcedWhileTheBodyArrives(query: String) async throws {
        let w = try Workspace()
        w.write("big.json", #"{"kind": "entry", "id": "x", "key": "big", "url": "\#(w.base)/bytes/5000000\#(query)", "maxBytes": 100000}"#)
        let result = try await w.run(["run", "big.json"])
        #expect(result.status == 4)
        let record = try w.record("big")
        #expect(record["status"] == .string("failed"))
        #expect(record["error"]?.stringValue?.contains("maxBytes (100000 bytes)") == true, "\(record["error"] ?? .null)")
        #expect(w.outputFiles().filter { !$0.hasPrefix("results/") && !$0.hasPrefix("runs/") && $0 != ".lock" }.isEmpty)
    }

    @Test func aHangingServerEndsTimedOutNearTheDeadline() async throws {
        let w = try Workspace()
        w.write("hang.json", #"{"kind": "entry", "id": "x", "key": "hang", "url": "\#(w.base)/entries/x.json?hang=1", "timeout": 0.5}"#)
        let result = try await w.run(["run", "hang.json"])
        #expect(result.status == 4)
        let record = try w.record("hang")
        #expect(record["status"] == .string("timedOut"))
        let duration = try #require(record["durationMs"]?.intValue)
        #expect(duration >= 490 && duration < 1500, "ended after \(duration) ms")
        #expect(record["waitedForNetworkMs"]?.intValue == 0)
    }

    @Test func aKeyAlreadyRunningEndsDuplicateAndTheServerSeesOneRequest() async throws {
        let w = try Workspace()
        w.write("dupes.json", """
            [{"kind": "entry", "id": "imgly.A.1", "key": "same", "url": "\(w.base)/entries/{id}.json?delay=400"},
             {"kind": "entry", "id": "imgly.A.1", "key": "same", "url": "\(w.base)/entries/{id}.json?delay=400"}]
            """)
        let result = try await w.run(["run", "dupes.json", "--json"])
        #expect(result.status == 1)
        let statuses = result.stdout.split(separator: "\n").compactMap { try? JSONParser.parse(String($0))["status"]?.stringValue }
        #expect(statuses.sorted() == ["duplicate", "succeeded"])
        #expect(w.server.requestCount(path: "/entries/imgly.A.1.json") == 1)
        #expect(try w.status("same") == "succeeded", "a duplicate does not overwrite the running task's record")
    }

    @Test func sigintCancelsRunningJobsRecordsThemAndExits130() async throws {
        let w = try Workspace()
        w.write("slow.json", """
            [{"kind": "entry", "id": "a", "key": "slow-a", "url": "\(w.base)/entries/{id}.json?hang=1", "timeout": 30},
             {"kind": "image", "key": "slow-b", "url": "\(w.base)/images/png.png?trickle=200", "timeout": 30}]
            """)
        let result = try await w.run(["run", "slow.json"]) { process in
            // Both jobs are running once the server has both requests: then interrupt.
            await eventually("both requests at the server") {
                w.server.requestCount(path: "/entries/a.json") == 1 && w.server.requestCount(path: "/images/png.png") == 1
            }
            kill(process.processIdentifier, SIGINT)
        }
        #expect(result.status == 130)
        #expect(try w.status("slow-a") == "cancelled")
        #expect(try w.status("slow-b") == "cancelled")
        #expect(w.leftovers().isEmpty)
        #expect(w.outputFiles().filter { $0.hasPrefix("images/") || $0.hasPrefix("entries/") }.isEmpty)
    }

    /// A SIGINT sent the moment the process shows it no longer dies of one (the kernel's view in
    /// /proc: caught or ignored) is never lost. A watcher that ignores the signal first and is
    /// told of it later (as a dispatch signal source is, from another thread) loses it in between,
    /// and the run goes on to its 30 s deadline.
    @Test func aSigintSentAsSoonAsTheRunnerCatchesSignalsIsNeverLost() async throws {
        let w = try Workspace()
        w.write("hang.json", """
            [{"kind": "entry", "id": "a", "key": "hang", "url": "\(w.base)/entries/{id}.json?hang=1", "timeout": 30}]
            """)
        for attempt in 1...4 {
            let started = ContinuousClock.now
            let result = try await w.run(["run", "hang.json", "--out", "out-\(attempt)"]) { process in
                let interrupt: UInt64 = 1 << UInt64(SIGINT - 1)
                while let status = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8) {
                    let masks = status.split(separator: "\n").compactMap { line -> UInt64? in
                        guard line.hasPrefix("SigCgt:") || line.hasPrefix("SigIgn:") else { return nil }
                        return UInt64(line.split(separator: "\t").last ?? "", radix: 16)
                    }
                    if masks.contains(where: { $0 & interrupt != 0 }) { break }
                    try? await Task.sleep(for: .microseconds(200))
                }
                kill(process.processIdentifier, SIGINT)
            }
            #expect(result.status == 130, "attempt \(attempt): exit \(result.status) after \(ContinuousClock.now - started)")
        }
    }
}
