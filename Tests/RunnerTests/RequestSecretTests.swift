import FixtureServer
import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// Headers with secret references (`{env:NAME}`, `{file:PATH}`): sent to the server, written
/// nowhere.
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(2)))
struct RequestSecretTests {
    /// A value no test or fixture could hold by chance.
    static func randomSecret() -> String { "s3cret-" + UUID().uuidString.lowercased() }

    func runner(_ w: Workspace, _ arguments: [String], _ environment: [String: String] = [:]) async throws -> RunnerBinary.Output {
        try await RunnerBinary.runExecutable(RunnerBinary.path, arguments, in: w.root, environment: environment)
    }

    /// Every file under `folder` (recursively) that holds `needle`, by path.
    static func files(under folder: String, holding needle: String) -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: folder) else { return [] }
        var found: [String] = []
        let bytes = Array(needle.utf8)
        while let name = walker.nextObject() as? String {
            let path = "\(folder)/\(name)"
            guard let data = FileManager.default.contents(atPath: path) else { continue }
            if [UInt8](data).firstRange(of: bytes) != nil { found.append(path) }
        }
        return found
    }

    @Test func aSecretIsSentButWrittenNowhere() async throws {
        let w = try Workspace()
        let envSecret = Self.randomSecret()
        let fileSecret = Self.randomSecret()
        w.write("token.txt", fileSecret + "\n")
        w.server.recordHeader(named: "authorization")
        let environment = ["RUNNER_TEST_TOKEN": envSecret]
        // Successes, a 404, a 500 (an error message) and children: everything that writes.
        let jobs = """
            {"defaults": {"headers": {"Authorization": "Bearer {env:RUNNER_TEST_TOKEN}", "x-api-key": "{file:\(w.root)/token.txt}"}}}
            {"kind": "entry", "id": "imgly.A.1", "url": "\(w.base)/entries/{id}.json"}
            {"kind": "entry", "id": "missing", "url": "\(w.base)/entries/{id}.json"}
            {"kind": "entry", "id": "imgly.A.2", "url": "\(w.base)/entries/{id}.json?status=500"}
            {"kind": "tree", "url": "\(w.base)/data.json", "entries": "\(w.base)/entries/{id}.json"}
            """
        w.write("jobs.jsonl", jobs)
        var outputs: [RunnerBinary.Output] = []
        outputs.append(try await runner(w, ["run", "jobs.jsonl"], environment))
        outputs.append(try await runner(w, ["run", "--json", "jobs.jsonl"], environment))
        #expect(outputs[0].status == 1, "a 404 and a 500 among the jobs: \(outputs[0].stderr)")

        // The secrets went out, on every request, children included.
        let sent = w.server.recordedHeaderValues
        #expect(sent.count > 10)
        #expect(sent.allSatisfy { $0.value == "Bearer \(envSecret)" }, "\(sent.prefix(3))")

        // Through a spool: the same jobs without headers, run by a watcher whose config binds
        // the secrets to the fixture server's host, then `runner status`.
        let world = SpoolWorld(workspace: w)
        w.write("spool-jobs.jsonl", jobs.split(separator: "\n").dropFirst().joined(separator: "\n"))
        let config = w.write("watch-config.json", """
            {"hosts": {"127.0.0.1": {"headers": {"Authorization": "Bearer {env:RUNNER_TEST_TOKEN}", "x-api-key": "{file:\(w.root)/token.txt}"}}}}
            """)
        outputs.append(try await runner(w, ["submit", "--spool", world.spool.root, "spool-jobs.jsonl"]))
        #expect(outputs.last?.status == 0, "\(outputs.last?.stderr ?? "")")
        let before = w.server.recordedHeaderValues.count
        let watcher = try world.startWatcher(["--out", "\(w.root)/spool-out", "--config", config], environment: environment)
        defer { watcher.terminate() }
        let settled = await world.wait(upTo: .seconds(30)) { !world.jobFiles(world.spool.failed).isEmpty || !world.jobFiles(world.spool.done).isEmpty }
        #expect(settled, "the watcher did not finish the file: \(world.log())")
        outputs.append(try await runner(w, ["status", "--spool", world.spool.root]))
        watcher.terminate()
        let fromConfig = w.server.recordedHeaderValues.dropFirst(before)
        #expect(fromConfig.count > 5 && fromConfig.allSatisfy { $0.value == "Bearer \(envSecret)" }, "the config's header went out: \(fromConfig.prefix(3))")

        for secret in [envSecret, fileSecret] {
            for output in outputs {
                #expect(!output.stdout.contains(secret) && !output.stderr.contains(secret))
            }
            #expect(!world.log().contains(secret))
            #expect(Self.files(under: w.out, holding: secret).isEmpty)
            #expect(Self.files(under: "\(w.root)/spool-out", holding: secret).isEmpty)
            #expect(Self.files(under: world.spool.root, holding: secret).isEmpty)
        }
        // The checks above looked at something: records and a run log exist.
        #expect(Self.files(under: w.out, holding: "\"status\"").count >= 5)
        #expect(!Self.files(under: "\(w.root)/spool-out", holding: "\"status\"").isEmpty)
    }

    /// Whoever writes a job for a watcher is not its operator: a job's `{env:}` and `{file:}`
    /// are refused by `submit`, by the API and by the watcher itself, and nothing is sent.
    @Test func aWatcherExpandsNoSecretReferenceOfAJob() async throws {
        let w = try Workspace()
        let secret = Self.randomSecret()
        w.write("token.txt", secret + "\n")
        let environment = ["RUNNER_TEST_TOKEN": secret]
        let world = SpoolWorld(workspace: w)
        let byEnvironment = #"{"kind": "entry", "key": "env", "id": "imgly.A.1", "url": "\#(w.base)/entries/{id}.json", "headers": {"Authorization": "Bearer {env:RUNNER_TEST_TOKEN}"}}"#
        let byFile = #"{"kind": "entry", "key": "file", "id": "imgly.A.1", "url": "\#(w.base)/entries/{id}.json", "headers": {"x-api-key": "{file:\#(w.root)/token.txt}"}}"#
        w.write("env.json", byEnvironment)
        w.write("defaults.jsonl", #"{"defaults": {"headers": {"x-api-key": "{file:\#(w.root)/token.txt}"}}}"# + "\n" + #"{"kind": "entry", "id": "imgly.A.1", "url": "\#(w.base)/entries/{id}.json"}"#)

        for file in ["env.json", "defaults.jsonl"] {
            let submitted = try await runner(w, ["submit", "--spool", world.spool.root, file], environment)
            #expect(submitted.status == 2, "\(submitted.stderr)")
            #expect(submitted.stderr.contains("is not expanded in a job a watcher runs"), "\(submitted.stderr)")
        }
        #expect(world.jobFiles(world.spool.inbox).isEmpty, "nothing was queued")

        // A file dropped straight into the inbox, past submit: the watcher refuses it.
        let (watcher, port) = try await LiveTests.startWatcher(world)
        defer { watcher.terminate() }
        try world.drop("file.json", byFile)
        #expect(await world.wait(upTo: .seconds(20)) { world.jobFiles(world.spool.failed).contains("file.json") }, "\(world.log())")
        let reason = world.text("\(world.spool.failed)/file.json\(Spool.errorSuffix)")
        #expect(reason.contains("{file:\(w.root)/token.txt} is not expanded in a job a watcher runs"), "\(reason)")

        // And the API.
        let posted = try await RawHTTP.exchange(port: port, "POST /api/jobs HTTP/1.1", body: Array(byEnvironment.utf8), headers: LiveTests.auth)
        #expect(posted.status == 400, "\(posted)")
        #expect(posted.body.contains("is not expanded in a job a watcher runs"), "\(posted.body)")

        // `run` is the operator's: the same job expands and sends.
        w.server.recordHeader(named: "authorization")
        #expect(try await runner(w, ["run", "env.json"], environment).status == 0)
        #expect(w.server.recordedHeaderValues.map(\.value) == ["Bearer \(secret)"])
        #expect(w.server.totalRequests == 1, "nothing reached the server from the watcher")
        await LiveTests.stop(watcher, world)
        #expect(!world.log().contains(secret))
    }

    @Test func aReferenceThatCannotExpandMakesTheFileInvalid() async throws {
        let w = try Workspace()
        w.write("env.json", #"{"kind": "entry", "id": "1", "url": "\#(w.base)/entries/{id}.json", "headers": {"x-api-key": "{env:RUNNER_TEST_UNSET_VARIABLE}"}}"#)
        let missing = try await runner(w, ["run", "env.json"])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("field 'headers'") && missing.stderr.contains("RUNNER_TEST_UNSET_VARIABLE"), "\(missing.stderr)")

        w.write("file.json", #"{"kind": "entry", "id": "1", "url": "\#(w.base)/entries/{id}.json", "headers": {"x-api-key": "{file:\#(w.root)/no-such-file}"}}"#)
        let noFile = try await runner(w, ["run", "file.json"])
        #expect(noFile.status == 2)
        #expect(noFile.stderr.contains("field 'headers'") && noFile.stderr.contains("\(w.root)/no-such-file"), "\(noFile.stderr)")

        w.write("two-lines.txt", "one\ntwo\n")
        w.write("lines.json", #"{"kind": "entry", "id": "1", "url": "\#(w.base)/entries/{id}.json", "headers": {"x-api-key": "{file:\#(w.root)/two-lines.txt}"}}"#)
        let lines = try await runner(w, ["run", "lines.json"])
        #expect(lines.status == 2)
        #expect(lines.stderr.contains("more than one line"), "\(lines.stderr)")

        #expect(w.server.totalRequests == 0, "nothing of an invalid file runs")
        #expect(!FileManager.default.fileExists(atPath: "\(w.out)/results"))
    }

    @Test func aBadHeaderIsRefusedByName() async throws {
        let w = try Workspace()
        w.write("bad.json", #"{"kind": "entry", "id": "1", "url": "\#(w.base)/entries/{id}.json", "headers": {"x api key": "v"}}"#)
        let name = try await runner(w, ["validate", "bad.json"])
        #expect(name.status == 2)
        #expect(name.stderr.contains("field 'headers'") && name.stderr.contains("not a valid header name"), "\(name.stderr)")
        w.write("number.json", #"{"kind": "entry", "id": "1", "url": "\#(w.base)/entries/{id}.json", "headers": {"x-n": 3}}"#)
        let number = try await runner(w, ["validate", "number.json"])
        #expect(number.status == 2)
        #expect(number.stderr.contains("x-n: must be a string"), "\(number.stderr)")
    }
}
