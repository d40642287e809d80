import FixtureServer
import Foundation
import RunnerTestSupport
import RunnerKit
import Testing

/// Headers go only to the origin they were given for; the config file's user agent, headers per
/// host and errors; both HTTP clients.
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(2)))
struct RequestOriginTests {
    func runner(_ w: Workspace, _ arguments: [String], _ environment: [String: String] = [:]) async throws -> RunnerBinary.Output {
        try await RunnerBinary.runExecutable(RunnerBinary.path, arguments, in: w.root, environment: environment)
    }

    static func encoded(_ url: String) -> String {
        url.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? url
    }

    @Test(arguments: ["curl", "urlsession"])
    func aRedirectToAnotherOriginDropsTheHeaders(client: String) async throws {
        let w = try Workspace()
        let other = FixtureServer()  // another port on the same host: another origin
        try other.start()
        defer { other.stop() }
        for server in [w.server, other] { server.recordHeader(named: "authorization") }
        // The config names the host 'localhost': its header goes to localhost only.
        w.write("config.json", #"{"hosts": {"localhost": {"headers": {"Authorization": "Basic config-secret"}}}}"#)
        let here = "http://127.0.0.1:\(w.server.port)"
        let localhost = "http://localhost:\(w.server.port)"
        let jobs = """
            {"kind": "entry", "id": "imgly.A.1", "url": "\(here)/redirect?to=\(Self.encoded("\(other.baseURL)/entries/imgly.A.1.json"))", "headers": {"Authorization": "Bearer job-secret"}}
            {"kind": "entry", "id": "imgly.A.2", "url": "\(here)/redirect?to=\(Self.encoded("/entries/imgly.A.2.json"))", "headers": {"Authorization": "Bearer job-secret"}}
            {"kind": "entry", "id": "imgly.A.3", "url": "\(localhost)/redirect?to=\(Self.encoded("\(here)/entries/imgly.A.3.json"))"}
            {"kind": "entry", "id": "imgly.B.1", "url": "\(localhost)/redirect?to=\(Self.encoded("/entries/imgly.B.1.json"))"}
            """
        w.write("jobs.jsonl", jobs)
        let result = try await runner(w, ["run", "--http", client, "--config", "config.json", "jobs.jsonl"])
        #expect(result.status == 0, "\(result.stderr)")

        let seen = w.server.recordedHeaderValues + other.recordedHeaderValues
        func sent(_ path: String) -> [String?] { seen.filter { $0.path == path }.map(\.value) }
        // Given to the first origin, and kept by a redirect within it.
        #expect(sent("/redirect").filter { $0 == "Bearer job-secret" }.count == 2)
        #expect(sent("/entries/imgly.A.2.json") == ["Bearer job-secret"])
        #expect(sent("/redirect").filter { $0 == "Basic config-secret" }.count == 2)
        #expect(sent("/entries/imgly.B.1.json") == ["Basic config-secret"])
        // Dropped on the way to another port, and to another host.
        #expect(sent("/entries/imgly.A.1.json") == [nil])
        #expect(sent("/entries/imgly.A.3.json") == [nil])
    }

    @Test func aHostsEntryWithAPortSendsItsSecretToThatPortOnlyAndAnUnusedEntryIsNamed() async throws {
        let w = try Workspace()
        let other = FixtureServer()  // the same host, another port: another service
        try other.start()
        defer { other.stop() }
        for server in [w.server, other] { server.recordHeader(named: "authorization") }
        w.write("config.json", """
            {"hosts": {"127.0.0.1:\(w.server.port)": {"headers": {"Authorization": "Bearer {env:RUNNER_TEST_TOKEN}"}},
                       "nowhere.example": {"headers": {"x-api-key": "k"}}}}
            """)
        w.write("jobs.jsonl", """
            {"kind": "entry", "id": "imgly.A.1", "url": "\(w.base)/entries/{id}.json"}
            {"kind": "entry", "id": "imgly.A.2", "url": "\(other.baseURL)/entries/{id}.json"}
            """)
        let result = try await runner(w, ["run", "--config", "config.json", "jobs.jsonl"], ["RUNNER_TEST_TOKEN": "t1"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(w.server.recordedHeaderValues.map(\.value) == ["Bearer t1"])
        #expect(other.recordedHeaderValues.map(\.value) == [nil])
        let warnings = result.stderr.split(separator: "\n").filter { $0.contains("warning") }
        #expect(warnings.count == 1, "\(result.stderr)")
        #expect(warnings.first?.contains("'nowhere.example'") == true)
        #expect(warnings.first?.contains("127.0.0.1") == false)

        let empty = try await runner(w, ["run", "--config", "config.json", "jobs.jsonl"], ["RUNNER_TEST_TOKEN": ""])
        #expect(empty.status == 2)
        #expect(empty.stderr.contains("the environment variable RUNNER_TEST_TOKEN is set but empty"), "\(empty.stderr)")
    }

    @Test(arguments: ["curl", "urlsession"])
    func aRefusedRequestSaysWhoseHeadersItCarriedAndHowTheAnswerBegan(client: String) async throws {
        let w = try Workspace()
        let other = FixtureServer()
        try other.start()
        defer { other.stop() }
        w.write("config.json", #"{"hosts": {"127.0.0.1:\#(w.server.port)": {"headers": {"Authorization": "Bearer wrong"}}}}"#)
        w.write("jobs.jsonl", """
            {"kind": "entry", "id": "imgly.A.1", "key": "config", "url": "\(w.base)/entries/{id}.json?status=401"}
            {"kind": "entry", "id": "imgly.A.1", "key": "none", "url": "\(other.baseURL)/entries/{id}.json?status=403"}
            {"kind": "entry", "id": "imgly.A.1", "key": "job", "url": "\(other.baseURL)/entries/{id}.json?status=403", "headers": {"x-api-key": "k"}}
            """)
        let result = try await runner(w, ["run", "--http", client, "--config", "config.json", "jobs.jsonl"])
        #expect(result.status == 4)
        let answer = "; the answer began: fixture status"
        #expect(try w.record("config")["error"]?.stringValue?.hasPrefix(
            "the server answered 401 Unauthorized; headers from the config's hosts entry '127.0.0.1:\(w.server.port)'\(answer) 401") == true)
        #expect(try w.record("none")["error"]?.stringValue?.hasPrefix(
            "the server answered 403 Forbidden; headers from no config hosts entry for 127.0.0.1:\(other.port)\(answer) 403") == true)
        #expect(try w.record("job")["error"]?.stringValue?.contains("headers from no config hosts entry for 127.0.0.1:\(other.port) and the job's own;") == true)
        #expect(result.stdout.contains("headers from the config's hosts entry"), "the table's note says it too")
    }

    @Test(arguments: ["curl", "urlsession"])
    func theConfigsUserAgentAndAJobsHeadersReplaceTheDefaults(client: String) async throws {
        let w = try Workspace()
        w.write("config.json", #"{"userAgent": "example-bot/2 (ops@example.org)"}"#)
        w.write("jobs.jsonl", """
            {"kind": "entry", "id": "config", "key": "config", "url": "\(w.base)/echo-headers?id={id}"}
            {"kind": "entry", "id": "job", "key": "job", "url": "\(w.base)/echo-headers?id={id}", "headers": {"user-agent": "job-agent/1", "Accept": "application/vnd.example+json"}}
            """)
        let result = try await runner(w, ["run", "--http", client, "jobs.jsonl"], ["RUNNER_CONFIG": "\(w.root)/config.json"])
        #expect(result.status == 0, "\(result.stderr)")
        func echoed(_ key: String) throws -> JSONValue {
            let output = try #require(try w.record(key)["output"]?.stringValue)
            return try JSONParser.parse(try #require(w.payload(output)))
        }
        #expect(try echoed("config")["user-agent"] == .string("example-bot/2 (ops@example.org)"))
        #expect(try echoed("config")["accept"] == .string("application/json"))
        #expect(try echoed("job")["user-agent"] == .string("job-agent/1"))
        #expect(try echoed("job")["accept"] == .string("application/vnd.example+json"))
    }

    @Test func childrenGetTheirParentsHeadersOnTheParentsOriginOnly() async throws {
        let w = try Workspace()
        w.server.recordHeader(named: "x-api-key")
        // A tree whose entries live on its own origin, then one whose entries live on another
        // (children of both have the same keys: two runs).
        let other = "http://localhost:\(w.server.port)"
        w.write("same.json", #"{"kind": "tree", "url": "\#(w.base)/data.json", "entries": "\#(w.base)/entries/{id}.json", "headers": {"x-api-key": "k1"}}"#)
        w.write("other.json", #"{"kind": "tree", "url": "\#(w.base)/data.json", "entries": "\#(other)/entries/{id}.json", "headers": {"x-api-key": "k1"}}"#)
        var sent: [[String?]] = []
        for file in ["same.json", "other.json"] {
            let before = w.server.recordedHeaderValues.count
            let result = try await runner(w, ["run", "--out", "out-\(file)", file])
            #expect(result.status == 0, "\(result.stderr)")
            let seen = w.server.recordedHeaderValues.dropFirst(before)
            #expect(seen.filter { $0.path == "/data.json" }.map(\.value) == ["k1"])
            sent.append(seen.filter { $0.path.hasPrefix("/entries/") }.map(\.value))
        }
        #expect(sent[0].count == 8 && sent[0].allSatisfy { $0 == "k1" }, "\(sent[0])")
        #expect(sent[1].count == 8 && sent[1].allSatisfy { $0 == nil }, "\(sent[1])")
    }

    @Test func theConfigIsCheckedFieldByField() async throws {
        let w = try Workspace()
        w.write("job.json", #"{"kind": "entry", "id": "1", "url": "\#(w.base)/entries/{id}.json"}"#)
        let cases: [(config: String, says: String)] = [
            (#"{"userAgnet": "x"}"#, "field 'userAgnet' is not a field of a config"),
            (#"{"hosts": {"api.example.com": {"rat": 5}}}"#, "field 'hosts.api.example.com.rat' is not a field of a host"),
            (#"{"hosts": {"api.example.com": {"rate": "5"}}}"#, "field 'hosts.api.example.com.rate' must be a number"),
            (#"{"hosts": {"api.example.com": {"perHost": 0}}}"#, "field 'hosts.api.example.com.perHost' must be a whole number"),
            (#"{"hosts": {"api.example.com": {"cacert": "missing.pem"}}}"#, "cannot read \(w.root)/missing.pem"),
            (#"{"hosts": {"*.example.com": {"headers": {"x-api-key": "{env:RUNNER_TEST_UNSET_VARIABLE}"}}}}"#, "RUNNER_TEST_UNSET_VARIABLE is not set"),
            (#"{"kinds": "dir"}"#, "field 'kinds' must be a list of folders"),
            (#"[1]"#, "must be a JSON object"),
        ]
        for (config, says) in cases {
            w.write("config.json", config)
            for command in [["run", "--config", "config.json", "job.json"], ["validate", "--config", "config.json", "job.json"]] {
                let result = try await runner(w, command)
                #expect(result.status == 2, "\(config)")
                #expect(result.stderr.contains("config config.json: ") && result.stderr.contains(says), "\(config): \(result.stderr)")
                #expect(result.stderr.split(separator: "\n").count <= 2, "\(result.stderr)")
            }
        }
        #expect(w.server.totalRequests == 0)
    }

    @Test func aConfigIsReadThroughASymbolicLink() async throws {
        let w = try Workspace()
        // As a mounted ConfigMap is: the file a name points at, elsewhere.
        try FileManager.default.createDirectory(atPath: "\(w.root)/data", withIntermediateDirectories: true)
        w.write("data/config.json", #"{"userAgent": "linked/1"}"#)
        try FileManager.default.createSymbolicLink(atPath: "\(w.root)/config.json", withDestinationPath: "data/config.json")
        w.write("job.json", #"{"kind": "entry", "id": "linked", "key": "linked", "url": "\#(w.base)/echo-headers?id={id}"}"#)
        let result = try await runner(w, ["run", "--config", "config.json", "job.json"])
        #expect(result.status == 0, "\(result.stderr)")
        let output = try #require(try w.record("linked")["output"]?.stringValue)
        #expect(try JSONParser.parse(try #require(w.payload(output)))["user-agent"] == .string("linked/1"))
        let missing = try await runner(w, ["run", "--config", "nowhere.json", "job.json"])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("config nowhere.json: does not exist"), "\(missing.stderr)")
    }

    @Test func theURLSessionClientRefusesTLSFilesInOneLine() async throws {
        let w = try Workspace()
        w.write("ca.pem", "not used\n")
        w.write("job.json", #"{"kind": "entry", "id": "1", "url": "\#(w.base)/entries/{id}.json"}"#)
        let result = try await runner(w, ["run", "--http", "urlsession", "--cacert", "ca.pem", "job.json"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("urlsession") && result.stderr.contains("--cacert"), "\(result.stderr)")
        #expect(w.server.totalRequests == 0)
    }
}

/// The example config and jobs of Jobs/ (shown in docs/real-apis.md) are valid as shipped.
@Suite(.startsProcesses, .timeLimit(.minutes(1)))
struct RequestExampleTests {
    @Test func theExampleConfigAndJobsValidate() async throws {
        let w = try Workspace()
        let jobs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Jobs").standardized.path
        // The example's CA lives on the user's machine: point it at one the test makes (any
        // readable file passes the config check), and keep its kinds folder.
        var config = try String(contentsOfFile: "\(jobs)/api-config.json", encoding: .utf8)
        w.write("internal-ca.pem", "-----BEGIN CERTIFICATE-----\n")
        config = config.replacingOccurrences(of: "/etc/ssl/acme/internal-ca.pem", with: "\(w.root)/internal-ca.pem")
        config = config.replacingOccurrences(of: #""kinds": ["kinds"]"#, with: #""kinds": ["\#(jobs)/kinds"]"#)
        w.write("api-config.json", config)
        w.write("acme-token", "token\n")
        let jobLines = try String(contentsOfFile: "\(jobs)/api-jobs.jsonl", encoding: .utf8)
            .replacingOccurrences(of: "/run/secrets/acme-token", with: "\(w.root)/acme-token")
        w.write("api-jobs.jsonl", jobLines)

        let arguments = ["validate", "--config", "api-config.json", "api-jobs.jsonl"]
        let valid = try await RunnerBinary.runExecutable(RunnerBinary.path, arguments, in: w.root, environment: ["ACME_API_KEY": "k"])
        #expect(valid.status == 0, "\(valid.stderr)")
        #expect(valid.stdout.contains("3 jobs, valid"), "\(valid.stdout)")
        let kinds = try await RunnerBinary.runExecutable(RunnerBinary.path, ["kinds", "--config", "api-config.json"], in: w.root, environment: ["ACME_API_KEY": "k"])
        #expect(kinds.stdout.contains("json-entry"), "the config's kinds folder is read: \(kinds.stdout)")

        let (status, message) = try await ChildProcess.run(
            RunnerBinary.path, arguments, environment: ProcessInfo.processInfo.environment.filter { $0.key != "ACME_API_KEY" }, directory: w.root)
        #expect(status == 2)
        #expect(message.contains("ACME_API_KEY is not set"), "\(message)")
    }
}
