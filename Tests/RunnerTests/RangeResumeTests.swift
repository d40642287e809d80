import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import RunnerKit
import RunnerTestSupport
import Testing

/// A large body cut on its way is resumed with `Range` and `If-Range`, and every answer a server
/// may give to that request, right or wrong, ends with the server's current file stored byte for
/// byte: the fixture server's `/ranged/N` answers wrongly on purpose (`RangedFile`). Each job's
/// first answer is cut at 2 000 000 bytes; its second attempt asks for the rest.
@Suite(.startsProcesses, .timeLimit(.minutes(3)))
struct RangeResumeTests {
    static let size = 3_000_000
    static let cut = 2_000_000
    /// The kept bytes a resume asks for again, to compare them with what it kept.
    static let overlap = 65_536
    /// Where a resume from the cut asks to start.
    static let asked = cut - overlap

    /// Byte `i` of version `v` of `/ranged/N`, as the fixture server makes it.
    static func file(version: Int = 0) -> [UInt8] { version == 0 ? version0 : version1 }
    static let version0 = make(version: 0)
    static let version1 = make(version: 1)
    private static func make(version: Int) -> [UInt8] {
        (0..<size).map { UInt8(truncatingIfNeeded: $0 % 251 + $0 / 251 + 37 * version) }
    }

    /// The folder the tests pass as `--kinds`: empty, since the built-in `file` kind stores any
    /// body as it is, in `files/<name>.bin` (a URL without an extension).
    static func writeKind(_ w: Workspace) {
        try? FileManager.default.createDirectory(atPath: "\(w.root)/k", withIntermediateDirectories: true)
    }

    struct Case: Sendable {
        var name: String
        var query: String
        /// The request the second attempt makes: `Range` from the cut, or none.
        var resumes: Bool
        /// The record's `resumedFrom`, when the stored file was resumed.
        var resumedFrom: Int?
        /// Words of the record's `startedOver`, when the kept bytes were fetched again.
        var startedOver: String?
        /// The file's version the server has at the end.
        var version = 0
    }

    static let cases: [Case] = [
        Case(name: "honor", query: "", resumes: true, resumedFrom: cut),
        Case(name: "earlier", query: "range=earlier", resumes: true, resumedFrom: cut),
        Case(name: "later", query: "range=later", resumes: true, startedOver: "starts at byte 1935464, after the 1934464 asked for (2000000 kept)"),
        Case(name: "total", query: "range=total", resumes: true, startedOver: "does not agree with the 3000000 bytes known"),
        Case(name: "ignore", query: "range=ignore", resumes: true, startedOver: "answered 200 to the range request"),
        Case(name: "200cr", query: "range=200cr", resumes: true, startedOver: "answered 200 with Content-Range 'bytes 1934464-2999999/3000000'"),
        Case(name: "416", query: "range=416", resumes: true, startedOver: "answered 416 to the range request"),
        Case(name: "changed", query: "change=1", resumes: true, startedOver: "answered 200 to the range request", version: 1),
        Case(name: "changedIgnoringIfRange", query: "change=1&range=ifrange", resumes: true, startedOver: "names another version", version: 1),
        Case(name: "novalidator", query: "range=novalidator", resumes: true, startedOver: "names no version of the file (no ETag)"),
        Case(name: "otheretag", query: "range=otheretag", resumes: true, startedOver: "names another version"),
        Case(name: "date", query: "validator=date", resumes: true, resumedFrom: cut),
        Case(name: "weak", query: "validator=weak", resumes: false),
        Case(name: "fresh", query: "validator=fresh", resumes: false),
        Case(name: "none", query: "validator=none", resumes: false),
    ]

    struct Seen: Sendable {
        var range: String?
        var ifRange: String?
        var status: Int
        var from: Int
    }

    static func log(_ w: Workspace, id: String) async throws -> [Seen] {
        let (data, _) = try await URLSession.shared.data(from: URL(string: "\(w.base)/ranged-log?id=\(id)")!)
        guard case .array(let items) = try JSONParser.parse([UInt8](data)) else { return [] }
        return items.map {
            Seen(range: $0["range"]?.stringValue, ifRange: $0["ifRange"]?.stringValue, status: $0["status"]?.intValue ?? 0, from: $0["from"]?.intValue ?? -1)
        }
    }

    @Test(arguments: ["curl", "urlsession"])
    func everyAnswerToARangeRequestEndsWithTheServersFileByteForByte(http: String) async throws {
        let w = try Workspace()
        Self.writeKind(w)
        let run = UUID().uuidString.prefix(8)
        let jobs = Self.cases.map { item in
            let query = "id=\(run)-\(item.name)&cut=\(Self.cut)" + (item.query.isEmpty ? "" : "&" + item.query)
            return #"{"kind": "file", "name": "\#(item.name)", "url": "\#(w.base)/ranged/\#(Self.size)?\#(query)", "retries": 1, "timeout": 20}"#
        }
        w.write("jobs.jsonl", jobs.joined(separator: "\n"))
        let result = try await w.run(["run", "jobs.jsonl", "--kinds", "k", "--http", http])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")

        for item in Self.cases {
            let record = try w.record("file:\(item.name)")
            let stored = w.payload("files/\(item.name).bin")
            let same = stored == Self.file(version: item.version)
            #expect(same, "\(item.name): the stored file is the server's version \(item.version): \(record)")
            #expect(record["sha256"]?.stringValue == SHA256.hex(Self.file(version: item.version)), "\(item.name): \(record)")
            #expect(record["bytes"]?.intValue == Self.size, "\(item.name): \(record)")
            #expect(record["resumedFrom"]?.intValue == item.resumedFrom, "\(item.name): \(record)")
            if let words = item.startedOver {
                #expect(record["startedOver"]?.stringValue?.contains(words) == true, "\(item.name): \(record)")
            } else {
                #expect(record["startedOver"] == nil, "\(item.name): \(record)")
            }
            let seen = try await Self.log(w, id: "\(run)-\(item.name)")
            #expect(seen.first?.range == nil && seen.count >= 2, "\(item.name): \(seen)")
            if item.resumes {
                #expect(seen[1].range == "bytes=\(Self.asked)-" && seen[1].ifRange != nil, "\(item.name): the second attempt asks for the rest: \(seen)")
                #expect(seen[1].ifRange.map { !$0.hasPrefix("W/") } == true, "\(item.name): \(seen)")
            } else {
                #expect(seen.count == 2 && seen[1].range == nil, "\(item.name): no strong validator, no range: \(seen)")
                #expect(record["transferred"]?.intValue == Self.cut + Self.size, "\(item.name): \(record)")
            }
            // A start over asks once more, without a range, unless the 200 to the range was the file.
            if let words = item.startedOver, !words.contains("answered 200 to") {
                #expect(seen.count == 3 && seen[2].range == nil, "\(item.name): \(seen)")
            }
            if item.resumedFrom != nil {
                let overlap = item.name == "earlier" ? 1000 : 0
                #expect(record["transferred"]?.intValue == Self.size + Self.overlap + overlap, "\(item.name): 2 000 000 cut, then the 1 000 000 left and 64 KiB again: \(record)")
            }
        }
        #expect(w.outputFiles().filter { $0.contains(".partial-") }.isEmpty, "no partial or sidecar is left: \(w.outputFiles())")
    }

    @Test(arguments: ["curl", "urlsession"])
    func aCodedBodyIsNeverResumedAndTheChecksJudgeTheWholePayload(http: String) async throws {
        let w = try Workspace()
        Self.writeKind(w)
        let run = UUID().uuidString.prefix(8)
        let whole = SHA256.hex(Self.file())
        let url = "\(w.base)/ranged/\(Self.size)"
        w.write("jobs.jsonl", """
            {"kind": "file", "name": "gzip", "url": "\(url)?id=\(run)-gzip&gzip=1&cut=2000", "retries": 1, "timeout": 20}
            {"kind": "file", "name": "checksum", "url": "\(url)?id=\(run)-checksum&cut=\(Self.cut)", "retries": 1, "timeout": 20, "checksum": "sha256:\(whole)"}
            {"kind": "file", "name": "wrongsum", "url": "\(url)?id=\(run)-wrongsum&cut=\(Self.cut)", "retries": 1, "timeout": 20, "checksum": "sha256:\(String(repeating: "0", count: 64))"}
            {"kind": "file", "name": "toolarge", "url": "\(url)?id=\(run)-toolarge&cut=\(Self.cut)&chunked=1", "retries": 1, "timeout": 20, "maxBytes": 2500000}
            """)
        let result = try await w.run(["run", "jobs.jsonl", "--kinds", "k", "--http", http])
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")

        let gzip = try w.record("file:gzip")
        let zeros = w.payload("files/gzip.bin") == [UInt8](repeating: 0, count: Self.size)
        #expect(gzip["status"] == .string("succeeded") && zeros, "\(gzip)")
        let gzipSeen = try await Self.log(w, id: "\(run)-gzip")
        #expect(gzipSeen.count == 2 && gzipSeen.allSatisfy { $0.range == nil }, "a coded body is not resumed: \(gzipSeen)")

        let checksum = try w.record("file:checksum")
        #expect(checksum["status"] == .string("succeeded") && checksum["resumedFrom"]?.intValue == Self.cut, "the checksum judged the whole file: \(checksum)")
        let wrong = try w.record("file:wrongsum")
        #expect(wrong["status"] == .string("failed") && wrong["error"]?.stringValue?.contains("checksum does not match") == true, "\(wrong)")
        #expect(w.payload("files/wrongsum.bin")?.count == nil)
        let large = try w.record("file:toolarge")
        #expect(large["status"] == .string("failed") && large["error"]?.stringValue?.contains("maxBytes") == true, "\(large)")
        #expect(w.outputFiles().filter { $0.contains(".partial-") }.isEmpty, "\(w.outputFiles())")
    }

    @Test func forgetRemovesTheBytesACutTransferKeptForItsKeyAlone() async throws {
        let w = try Workspace()
        Self.writeKind(w)
        let id = UUID().uuidString.prefix(8)
        w.write("jobs.json", """
            [{"kind": "file", "name": "a", "url": "\(w.base)/ranged/\(Self.size)?id=\(id)-a&cut=\(Self.cut)", "timeout": 20},
             {"kind": "file", "name": "b", "url": "\(w.base)/ranged/\(Self.size)?id=\(id)-b&cut=\(Self.cut)", "timeout": 20}]
            """)
        #expect(try await w.run(["run", "jobs.json", "--kinds", "k"]).status != 0)
        let kept = w.outputFiles().filter { $0.contains(".partial-") }
        #expect(kept.count == 4, "two partials and their sidecars: \(w.outputFiles())")

        let forget = try await w.run(["forget", "file:a"])
        #expect(forget.status == 0, "\(forget.stderr)")
        let left = w.outputFiles().filter { $0.contains(".partial-") }
        #expect(left.count == 2, "b's partial and sidecar stay: \(left)")
        for path in kept where !left.contains(path) {
            #expect(forget.stdout.contains(path), "the removed \(path) is named: \(forget.stdout)")
        }
        // b still resumes from what it kept; a starts afresh.
        #expect(try await w.run(["run", "jobs.json", "--kinds", "k"]).status == 0)
        #expect(try w.record("file:b")["resumedFrom"]?.intValue == Self.cut)
        #expect(try w.record("file:a")["resumedFrom"] == nil)
    }

    @Test func theNextRunResumesWhatAnEarlierOneKeptAndAChangedURLStartsAfresh() async throws {
        let w = try Workspace()
        Self.writeKind(w)
        let id = UUID().uuidString.prefix(8)
        let url = "\(w.base)/ranged/\(Self.size)?id=\(id)&cut=\(Self.cut)"
        w.write("job.json", #"{"kind": "file", "name": "a", "url": "\#(url)", "timeout": 20}"#)
        let first = try await w.run(["run", "job.json", "--kinds", "k"])
        #expect(first.status != 0)
        let kept = w.outputFiles().filter { $0.contains(".partial-") }
        #expect(kept.count == 2, "the partial and its sidecar: \(w.outputFiles())")
        let second = try await w.run(["run", "job.json", "--kinds", "k"])
        #expect(second.status == 0, "\(second.stdout)\(second.stderr)")
        let record = try w.record("file:a")
        #expect(record["resumedFrom"]?.intValue == Self.cut && record["transferred"]?.intValue == Self.size - Self.asked, "\(record)")
        let same = w.payload("files/a.bin") == Self.file()
        #expect(same)
        #expect(w.outputFiles().filter { $0.contains(".partial-") }.isEmpty, "\(w.outputFiles())")

        // Kept bytes of another URL are not resumed: the sidecar names the URL.
        w.write("other.json", #"{"kind": "file", "name": "b", "url": "\#(w.base)/ranged/\#(Self.size)?id=\#(id)-b&cut=\#(Self.cut)", "timeout": 20}"#)
        _ = try await w.run(["run", "other.json", "--kinds", "k"])
        w.write("other.json", #"{"kind": "file", "name": "b", "url": "\#(w.base)/ranged/\#(Self.size)?id=\#(id)-b&cut=\#(Self.cut)&moved=1", "timeout": 20}"#)
        let moved = try await w.run(["run", "other.json", "--kinds", "k"])
        #expect(moved.status == 0)
        #expect(try w.record("file:b")["resumedFrom"] == nil)
        let sameB = w.payload("files/b.bin") == Self.file()
        #expect(sameB)
    }

    /// A watcher that stopped leaves the kept bytes where the next one finds them: the same job
    /// dropped again into the spool, for a new watcher, asks only for the rest.
    @Test func aRestartedWatcherResumesWhatTheLastOneKept() async throws {
        let s = try SpoolWorld()
        Self.writeKind(s.w)
        let url = "\(s.base)/ranged/\(Self.size)?id=\(UUID().uuidString.prefix(8))&cut=\(Self.cut)"
        let job = #"{"kind": "file", "name": "w", "url": "\#(url)", "timeout": 20}"#
        let first = try s.startWatcher(["--kinds", "\(s.w.root)/k"], name: "first")
        defer { first.terminate() }
        try s.drop("one.json", job)
        #expect(await s.wait(upTo: .seconds(30)) { s.jobFiles(s.spool.failed) == ["one.json"] }, "\(s.log("first"))")
        first.signal(SIGTERM)
        #expect(await s.exit(of: first, upTo: .seconds(20)) != nil)
        #expect(s.w.outputFiles().filter { $0.contains(".partial-") }.count == 2, "the partial and its sidecar stay: \(s.w.outputFiles())")

        let second = try s.startWatcher(["--kinds", "\(s.w.root)/k"], name: "second")
        defer { second.terminate() }
        try s.drop("two.json", job)
        #expect(await s.wait(upTo: .seconds(30)) { s.jobFiles(s.spool.done) == ["two.json"] }, "\(s.log("second"))")
        let record = try s.w.record("file:w")
        #expect(record["resumedFrom"]?.intValue == Self.cut && record["transferred"]?.intValue == Self.size - Self.asked, "\(record)")
        let same = s.w.payload("files/w.bin") == Self.file()
        #expect(same)
    }

    @Test func aStalledAttemptResumesWhereItStopped() async throws {
        let w = try Workspace()
        Self.writeKind(w)
        let id = UUID().uuidString.prefix(8)
        // The first answer stops after 2 000 000 bytes; the second (1 000 000 from there) does not.
        let url = "\(w.base)/ranged/\(Self.size)?id=\(id)&trickleAfter=\(Self.cut)&trickle=60000"
        w.write("job.json", #"{"kind": "file", "name": "s", "url": "\#(url)", "timeout": 30, "stall": 1, "retries": 1}"#)
        let result = try await w.run(["run", "job.json", "--kinds", "k"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let record = try w.record("file:s")
        #expect(record["attempts"]?.intValue == 2 && record["resumedFrom"]?.intValue == Self.cut, "\(record)")
        let same = w.payload("files/s.bin") == Self.file()
        #expect(same)
    }

    /// kill -9 in the middle of a 1 GiB body: the next run resumes from what the last sidecar
    /// names (at most 64 MiB before where the file had come to) and ends with the right file.
    @Test(.timeLimit(.minutes(2))) func aRunKilledInTheMiddleOfAGiBResumesFromWhatIsOnDisk() async throws {
        let w = try Workspace()
        Self.writeKind(w)
        let size = 1 << 30
        let id = UUID().uuidString.prefix(8)
        w.write("job.json", #"{"kind": "file", "name": "big", "url": "\#(w.base)/ranged/\#(size)?id=\#(id)", "timeout": 120, "maxBytes": \#(size)}"#)
        let runner = try ChildProcess(
            RunnerBinary.path, ["run", "job.json", "--kinds", "k", "--out", w.out, "--limit-rate", "100M"], directory: w.root, stdout: .null, stderr: .null)
        defer { runner.terminate(grace: .zero) }
        let files = "\(w.out)/files"
        func sidecarBytes() -> Int? {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: files)) ?? []
            guard let name = names.first(where: { $0.hasSuffix(".json") }), let text = FileManager.default.contents(atPath: "\(files)/\(name)"),
                let sidecar = try? JSONParser.parse([UInt8](text))
            else { return nil }
            return sidecar["bytes"]?.intValue
        }
        // Past the second sync (65 MiB), well before the end.
        let deadline = ContinuousClock.now + .seconds(60)
        while (sidecarBytes() ?? 0) < 300 << 20, ContinuousClock.now < deadline, runner.isRunning {
            try await Task.sleep(for: .milliseconds(50))
        }
        runner.signal(SIGKILL)
        await runner.waitUntilExit()
        let partial = try #require(((try? FileManager.default.contentsOfDirectory(atPath: files)) ?? []).first { !$0.hasSuffix(".json") })
        let onDisk = try #require(try FileManager.default.attributesOfItem(atPath: "\(files)/\(partial)")[.size] as? Int)
        #expect(onDisk > 300 << 20 && onDisk < size, "killed in the middle: \(onDisk)")

        let second = try await w.run(["run", "job.json", "--kinds", "k"])
        #expect(second.status == 0, "\(second.stdout)\(second.stderr)")
        let record = try w.record("file:big")
        let resumedFrom = try #require(record["resumedFrom"]?.intValue, "\(record)")
        #expect(resumedFrom <= onDisk && onDisk - resumedFrom <= 64 << 20, "at most 64 MiB came again: \(resumedFrom) of \(onDisk)")
        #expect(record["transferred"]?.intValue == size - resumedFrom + Self.overlap, "\(record)")
        #expect(record["bytes"]?.intValue == size)
        #expect(try Self.matchesRangedFile("\(w.out)/files/big.bin", count: size), "the stored GiB is the server's, byte for byte")
    }

    /// Whether the file at `path` is the first `count` bytes of `/ranged/N`, version 0 (read in
    /// pieces: the bytes repeat every 251 * 256).
    static func matchesRangedFile(_ path: String, count: Int) throws -> Bool {
        let period = 251 * 256
        let cycle = (0..<(period * 32)).map { UInt8(truncatingIfNeeded: $0 % 251 + $0 / 251) }
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        var done = 0
        while done < count {
            guard let piece = try handle.read(upToCount: cycle.count), !piece.isEmpty else { return false }
            let same = piece.withUnsafeBytes { got in cycle.withUnsafeBytes { memcmp(got.baseAddress!, $0.baseAddress!, got.count) == 0 } }
            guard same else { return false }
            done += piece.count
        }
        return try handle.read(upToCount: 1)?.isEmpty ?? true
    }
}
