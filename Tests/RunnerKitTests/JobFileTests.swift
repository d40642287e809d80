import Foundation
import RunnerKit
import Testing

/// The four forms of a job file, and every bad input refused with file, job and field named.
@Suite struct JobFileTests {
    let folder = TemporaryFolder()
    let registry = probeRegistry()

    func jobs(_ name: String, _ text: String) throws -> [JobDescriptor] {
        let path = folder.write(name, text)
        return try IteratorSequence(JobFileReader(path: path, registry: registry)).map { try $0.get() }
    }

    func errors(_ name: String, _ text: String) -> [String] {
        let path = folder.write(name, text)
        return JobFileReader.validate(path: path, registry: registry).errors.map {
            $0.description.replacingOccurrences(of: folder.path + "/", with: "")
        }
    }

    @Test func oneJob() throws {
        let decoded = try jobs("one.json", #"{"kind": "probe", "url": "https://example.org/a.png", "flavor": "x"}"#)
        #expect(decoded.count == 1)
        #expect(decoded[0].key == "probe:https://example.org/a.png")
        #expect(decoded[0].timeout == .seconds(2))
        #expect(decoded[0].noticeAfter == .milliseconds(500))
        #expect(decoded[0].retries == 0)
        #expect(decoded[0].maxBytes == 64 << 20)
        #expect((decoded[0].parameters as? ProbeKind)?.flavor == "x")
    }

    @Test func batchWithDefaults() throws {
        let decoded = try jobs("batch.json", """
            {"defaults": {"kind": "probe", "timeout": 5, "flavor": "d"},
             "jobs": [{"url": "http://h/1"}, {"url": "http://h/2", "timeout": 0.25, "flavor": "own", "key": "k2"}]}
            """)
        #expect(decoded.map(\.timeout) == [.seconds(5), .milliseconds(250)])
        #expect(decoded.map { ($0.parameters as? ProbeKind)?.flavor } == ["d", "own"])
        #expect(decoded[1].key == "k2")
    }

    @Test func bareArray() throws {
        let decoded = try jobs("array.json", #"[{"kind": "probe", "url": "http://h/1"}, {"kind": "probe", "url": "http://h/2", "retries": 3}]"#)
        #expect(decoded.map(\.retries) == [0, 3])
    }

    @Test func jsonLinesWithADefaultsLineAndBlankLines() throws {
        let decoded = try jobs("lines.jsonl", """
            {"defaults": {"kind": "probe", "maxBytes": 100}}
            {"url": "http://h/1"}

            {"url": "http://h/2", "maxBytes": 7}\r
            """)
        #expect(decoded.map(\.maxBytes) == [100, 7])
    }

    @Test func objectsOnLinesInAJSONFileAreJSONLines() throws {
        let decoded = try jobs("lines.json", "{\"kind\": \"probe\", \"url\": \"http://h/1\"}\n{\"kind\": \"probe\", \"url\": \"http://h/2\"}\n")
        #expect(decoded.count == 2)
    }

    @Test(arguments: [
        (#"[{"kind": "probe", "url": "http://h/"}, {"kind": "nope", "url": "http://h/"}]"#, "f.json: job 2: field 'kind' names an unknown kind 'nope' (known kinds: probe)"),
        (#"{"kind": "probe"}"#, "f.json: field 'url' is missing"),
        (#"{"url": "http://h/"}"#, "f.json: field 'kind' is missing"),
        (#"{"kind": "probe", "url": "http://h/", "timeout": "2"}"#, "f.json: field 'timeout' must be a number, not a string"),
        (#"{"kind": "probe", "url": "http://h/", "timeout": 0}"#, "f.json: field 'timeout' must be a number of seconds greater than 0"),
        (#"{"kind": "probe", "url": "http://h/", "timeout": -1}"#, "f.json: field 'timeout' must be a number of seconds greater than 0"),
        (#"{"kind": "probe", "url": "http://h/", "retries": 1.5}"#, "f.json: field 'retries' must be a whole number, not a number"),
        (#"{"kind": "probe", "url": "http://h/", "colour": "red"}"#, "f.json: field 'colour' is not a field of kind 'probe'"),
        (#"{"kind": "probe", "url": "ftp://h/x"}"#, "f.json: field 'url' uses the scheme 'ftp'; only http and https are supported"),
        (#"{"kind": "probe", "url": "http://h/", "output": "/etc/passwd"}"#, "f.json: field 'output' must be a path relative to the output directory, not '/etc/passwd'"),
        (#"{"kind": "probe", "url": "http://h/", "output": "a/../../x"}"#, "f.json: field 'output' must not climb out of the output directory with '..'"),
        (#"{"kind": "probe", "url": "http://h/", "output": "results/x.json"}"#, "f.json: field 'output' must not point into results/, runs/ or a hidden name"),
        (#"{"kind": "probe", "url": "http://h/""#, "f.json: is not valid JSON: expected ',' or '}' in an object at line 1, column 37"),
        (#"{"jobs": [], "defaults": {}}"#, "f.json: field 'jobs' is an empty array"),
        (#"{"defaults": {"bogus": 1}, "jobs": [{"kind": "probe", "url": "http://h/"}]}"#, "f.json: defaults: field 'bogus' is not a field of any job kind"),
        ("  \n", "f.json: is empty"),
        ("42", "f.json: must hold a job object, a batch or an array of jobs, not a number"),
    ])
    func badInputIsRefusedWithFileJobAndField(text: String, expected: String) {
        #expect(errors("f.json", text) == [expected])
    }

    @Test func badLineOfJSONLinesNamesTheLine() {
        let found = errors("f.jsonl", """
            {"kind": "probe", "url": "http://h/1"}
            {"kind": "probe", "url": "http://h/2", "timeout": false}
            not json
            """)
        #expect(found == [
            "f.jsonl: line 2: field 'timeout' must be a number, not a boolean",
            "f.jsonl: line 3: is not valid JSON: unexpected character 'n' at column 1",
        ])
    }

    @Test func emptyFileAndNotUTF8AreRefused() {
        #expect(errors("empty.json", "") == ["empty.json: is empty"])
        let path = folder.write("latin1.json", bytes: Array(#"{"kind": "probe", "url": "http://h/caf"#.utf8) + [0xE9] + Array(#""}"#.utf8))
        #expect(JobFileReader.validate(path: path, registry: registry).errors.map(\.problem.message) == ["is not UTF-8 text"])
        #expect(errors("missing-dir/none.json", "x").isEmpty == false)
    }

    @Test func entryStyleUrlIsResolvedBeforeTheSchemeCheck() {
        #expect(errors("ok.json", #"{"kind": "probe", "url": "http://h/{id}.json"}"#).isEmpty)
    }
}

@Suite struct OutputStoreTests {
    let folder = TemporaryFolder()

    @Test(arguments: [
        ("imgly.A.1", "imgly.A.1"),
        ("plain-name_1", "plain-name_1"),
        // Names already on disk from earlier runs: the mapping must never change.
        ("entry:e1", "entry_e1-7b77d10913"),
        ("image:cat-1", "image_cat-1-a82c438ca1"),
        (".hidden", "_hidden-1692419006"),
        ("ünï/cödé 😀", "_n__c_d___-64734fe6f1"),
        ("", "-e3b0c44298"),
        (String(repeating: "x", count: 120), String(repeating: "x", count: 100) + "-13f05a0b59"),
    ])
    func keysMapToStableFileNames(key: String, name: String) {
        #expect(OutputStore.fileName(forKey: key) == name)
    }

    @Test func unsafeKeysAreMadeSafeAndStayDistinct() {
        let keys = ["a/b", "a_b", "a:b", "../../etc/passwd", ".hidden", "ünï", String(repeating: "x", count: 300), "$(rm -rf ~)", ""]
        let names = keys.map(OutputStore.fileName(forKey:))
        #expect(Set(names).count == keys.count)
        for name in names {
            #expect(!name.contains("/"))
            #expect(!name.hasPrefix("."))
            #expect(name.utf8.count <= 111)
            #expect(name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) })
        }
    }

    @Test func writesAreAtomicAndLeaveNoTemporaryFiles() throws {
        let store = try OutputStore(root: folder.path + "/out")
        try store.write(Array("first".utf8), to: "entries/a.json")
        try store.write(Array("second".utf8), to: "entries/a.json")
        #expect(try String(contentsOfFile: store.absolute("entries/a.json"), encoding: .utf8) == "second")
        let temporary = try store.makeTemporaryFile(in: "entries")
        try temporary.append(Array("partial".utf8))
        temporary.discard()
        #expect(folder.files() == ["out/entries/a.json"])
    }

    @Test func aFolderRemovedDuringARunIsMadeAgain() throws {
        let store = try OutputStore(root: folder.path + "/out")
        try store.write(Array("first".utf8), to: "entries/a.json")
        try FileManager.default.removeItem(atPath: store.absolute("entries"))
        try store.write(Array("second".utf8), to: "entries/b.json")
        #expect(folder.files() == ["out/entries/b.json"])
    }

    @Test func aLinkPlantedWhereAFolderShouldBeIsRefused() throws {
        let store = try OutputStore(root: folder.path + "/out")
        try FileManager.default.createDirectory(atPath: folder.path + "/elsewhere", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: store.absolute("images"), withDestinationPath: folder.path + "/elsewhere")
        #expect(throws: OutputStore.WriteError.self) { try store.write([1], to: "images/x.png") }
        #expect(throws: OutputStore.WriteError.self) { try store.write([1], to: "images/deeper/x.png") }
        #expect((try? FileManager.default.contentsOfDirectory(atPath: folder.path + "/elsewhere")) == [])
    }

    /// The kept bytes of a cut transfer stay for a week for their key to come back; then
    /// `prune` removes them with their sidecar, and leaves younger ones.
    @Test func pruneRemovesPartialsUntouchedForAWeekAndNoOthers() throws {
        let store = try OutputStore(root: folder.path + "/out")
        let old = PartialDownload(folder: "files", key: "file:old", url: URL(string: "http://h.example/old")!)
        let young = PartialDownload(folder: "files", key: "file:young", url: URL(string: "http://h.example/young")!)
        try store.write([1, 2, 3], to: "files/" + old.name)
        try store.write([4], to: "files/" + old.sidecarName)
        try store.write([5, 6], to: "files/" + young.name)
        let weekAgo = Int(time(nil)) - Int(PartialDownload.keptFor.inSeconds) - 60
        for name in [old.name, old.sidecarName] {
            var times = [timespec(tv_sec: weekAgo, tv_nsec: 0), timespec(tv_sec: weekAgo, tv_nsec: 0)]
            #expect(utimensat(AT_FDCWD, store.absolute("files/" + name), &times, 0) == 0)
        }
        let listed = store.prune(dryRun: true, minimumAge: 0)
        #expect(listed.files == ["files/" + old.name, "files/" + old.sidecarName].sorted(), "\(listed.files)")
        #expect(store.fileExists("files/" + old.name), "a dry run removes nothing")
        let pruned = store.prune(dryRun: false, minimumAge: 0)
        #expect(pruned.bytes == 4)
        #expect(folder.files() == ["out/files/" + young.name], "\(folder.files())")
    }

    /// `forget` removes the key's kept bytes and sidecar in whatever folder they are, and leaves
    /// a pair whose sidecar names another key (the same name from the same hash).
    @Test func forgetRemovesTheKeysPartialsAndLeavesAnotherKeysOfTheSameName() throws {
        let store = try OutputStore(root: folder.path + "/out")
        let mine = PartialDownload(folder: "a/b", key: "file:a", url: URL(string: "http://h.example/a")!)
        try store.write(Array(#"{"key": "file:a"}"#.utf8), to: store.recordPath(forKey: "file:a"))
        try store.write([1, 2], to: "a/b/" + mine.name)
        try store.write(Array(#"{"key": "file:a"}"#.utf8), to: "a/b/" + mine.sidecarName)
        try store.write([3], to: "c/" + mine.name)
        try store.write(Array(#"{"key": "file:other"}"#.utf8), to: "c/" + mine.sidecarName)

        let forgotten = try #require(store.forget(key: "file:a"))
        #expect(forgotten.removed.sorted() == ["a/b/" + mine.name, "a/b/" + mine.sidecarName, store.recordPath(forKey: "file:a")].sorted())
        #expect(folder.files().sorted() == ["out/c/" + mine.name, "out/c/" + mine.sidecarName].sorted(), "\(folder.files())")
    }

    @Test func aSmallPayloadStaysInMemoryUntilCommittedAndALargeOneSpills() throws {
        let store = try OutputStore(root: folder.path + "/out")
        // The last is hashed by the hash thread, reading the file back, beside the writes.
        for size in [0, 10, Payload.memoryLimit, Payload.memoryLimit + 1, 3 * Payload.memoryLimit + 17, 13_000_017] {
            let body = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ size) }
            let payload = Payload(store: store, folder: "entries", maxBytes: 1 << 30)
            for chunk in stride(from: 0, to: size, by: 16_000) {
                try body[chunk..<min(size, chunk + 16_000)].withUnsafeBytes { try payload.write($0) }
            }
            let onDisk = folder.files().filter { $0.hasPrefix("out/entries/.tmp-") }
            #expect(onDisk.count == (size > Payload.memoryLimit ? 1 : 0), "size \(size): \(onDisk)")
            #expect(payload.count == size)
            #expect(try payload.digest() == SHA256.hex(body))
            #expect(payload.suffix == Array(body.suffix(Payload.suffixLimit)))
            let readBack = try payload.bytes() == body
            #expect(readBack)
            try store.commit(payload.file(), to: "entries/p\(size).bin")
            let stored = try Data(contentsOf: URL(fileURLWithPath: store.absolute("entries/p\(size).bin"))) == Data(body)
            #expect(stored)
        }
        #expect(folder.files().count == 6)
    }

    @Test func aTemporaryFileDisappearsWithItsOwner() throws {
        let store = try OutputStore(root: folder.path + "/out")
        do {
            let temporary = try store.makeTemporaryFile(in: "images")
            try temporary.append([1, 2, 3])
            #expect(folder.files().count == 1)
        }
        #expect(folder.files().isEmpty)
    }

    @Test func commitReplacesASymlinkInsteadOfWritingThroughIt() throws {
        let store = try OutputStore(root: folder.path + "/out")
        let victim = folder.write("victim.txt", "precious")
        try FileManager.default.createDirectory(atPath: store.absolute("images"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: store.absolute("images/x.png"), withDestinationPath: victim)
        try store.write(Array("new".utf8), to: "images/x.png")
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "precious")
        #expect(try String(contentsOfFile: store.absolute("images/x.png"), encoding: .utf8) == "new")
    }

    @Test func recordsRoundTrip() throws {
        let store = try OutputStore(root: folder.path + "/out")
        let result = JobResult(key: "image:cat-1", kind: "image", url: "https://cataas.com/cat/cat-1", status: .succeeded, output: "images/cat-1.png", attempts: 1,
                               startedAt: .init(timeIntervalSince1970: 0), finishedAt: .init(timeIntervalSince1970: 0.041),
                               details: [("format", .string("png"))])
        try store.writeRecord(result)
        let record = try #require(store.readRecord(forKey: "image:cat-1"))
        #expect(record.objectValue?.map(\.key) == ["key", "kind", "url", "status", "output", "error", "httpStatus", "bytes", "sha256",
                                                 "attempts", "waitedForNetworkMs", "durationMs", "startedAt", "finishedAt", "details"])
        #expect(record["finishedAt"] == .string("1970-01-01T00:00:00.041Z"))
        #expect(record["url"] == .string("https://cataas.com/cat/cat-1"))
        #expect(record["details"]?["format"] == .string("png"))
    }
}
