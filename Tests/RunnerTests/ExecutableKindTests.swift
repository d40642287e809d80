import FixtureServer
import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// Executable kinds: a program gets the job on stdin and answers on stdout; the runner keeps
/// the deadline, retries, signals and the atomic write.
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(3)))
struct ExecutableKindTests {
    /// A workspace with a kind `prog` running `prog.py` (given), fetching unless `fetch` is false.
    static func workspace(program: String, fetch: Bool = true, extra: String = "") throws -> Workspace {
        let w = try Workspace()
        try FileManager.default.createDirectory(atPath: "\(w.root)/k", withIntermediateDirectories: true)
        w.write("k/prog.json", """
            {"kind": "prog", "summary": "A test program.", "parameters": {"name": {"type": "string", "default": "x"}},
             "key": "prog:{name}", "folder": "progs", "extension": "txt",
             "exec": ["python3", "prog.py"], "fetch": \(fetch)\(extra)}
            """)
        w.write("k/prog.py", "import json, os, sys, time, signal, subprocess\nrequest = json.load(sys.stdin)\n" + program)
        return w
    }

    /// The pid a shell wrote with `echo $$ > FILE`, once the line is whole. The shell makes the
    /// file before it writes to it, so that the file exists says nothing yet.
    static func writtenPid(atPath path: String) -> pid_t? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8), text.hasSuffix("\n") else { return nil }
        return pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Whether a process runs: it exists and is not a zombie waiting for its (adoptive) parent.
    static func alive(_ pid: pid_t) -> Bool {
        guard kill(pid, 0) == 0 || errno == EPERM else { return false }
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        let state = stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).first
        return state != "Z" && state != "X"
    }

    @Test func theProgramGetsTheJobAndItsAnswerIsRecorded() async throws {
        let w = try Self.workspace(program: """
            sys.stderr.write("looked at " + request["payload"] + "\\n")
            size = os.path.getsize(request["payload"])
            print(json.dumps({"status": "succeeded", "details": {"size": size, "name": request["job"]["name"],
                "attempt": request["attempt"], "status": request["response"]["status"], "cwd": os.path.basename(os.getcwd()),
                "key": request["key"], "hasDeadline": "T" in request["deadline"], "workdir": os.path.isdir(request["workdir"])},
                "children": [{"kind": "image", "key": "image:child", "url": request["url"].rsplit("/", 2)[0] + "/images/png.png"},
                             {"kind": "image", "nope": 1, "url": request["url"]}]}))
            """)
        w.write("job.json", #"{"kind": "prog", "name": "one", "url": "\#(w.base)/bytes/1234"}"#)
        let result = try await w.run(["run", "job.json", "--kinds", "k"])
        #expect(result.status == 0, "\(result.stderr)")
        let record = try w.record("prog:one")
        let details = try #require(record["details"])
        #expect(details["size"] == .number(1234))
        #expect(details["name"] == .string("one"))
        #expect(details["attempt"] == .number(1))
        #expect(details["status"] == .number(200))
        #expect(details["cwd"] == .string("k"), "the program runs in the kind file's folder")
        #expect(details["key"] == .string("prog:one"))
        #expect(details["hasDeadline"] == .bool(true) && details["workdir"] == .bool(true))
        #expect(details["children"]?["succeeded"] == .number(1))
        #expect(details["children"]?["invalid"] == .number(1), "children are validated like jobs of a job file")
        #expect(record["bytes"] == .number(1234))
        #expect(record["output"] == .string("progs/one.txt"))
        #expect(
            result.stderr.split(separator: "\n").contains { $0.hasPrefix("prog:one: looked at /") },
            "stderr is passed on with the key: \(result.stderr)")
        #expect(try w.status("image:child") == "succeeded")
    }

    /// `runner watch` shows a program's stderr as `runner run` does: `<key>: <line>`, escaped.
    @Test func aWatcherShowsTheProgramsStderrWithTheKey() async throws {
        let w = try Self.workspace(program: """
            sys.stderr.write("checked " + request["job"]["name"] + "\\x1b[2J\\n")
            print(json.dumps({"status": "succeeded"}))
            """)
        let s = SpoolWorld(workspace: w)
        try s.drop("job.json", #"{"kind": "prog", "name": "watched", "url": "\#(w.base)/bytes/10"}"#)
        let watcher = try s.startWatcher(["--kinds", "\(w.root)/k"])
        defer { watcher.terminate() }
        let shown = await s.wait(upTo: .seconds(30)) { s.log().contains("prog:watched: checked watched") }
        #expect(shown, "\(s.log())")
        #expect(s.log().split(separator: "\n").contains("prog:watched: checked watched\\x1B[2J"), "\(s.log())")
    }

    @Test func theProgramGetsTheHeadersTheRunnerWouldSendSecretsExpanded() async throws {
        let w = try Self.workspace(program: """
            open(os.path.join(request["workdir"], "x"), "w").write(json.dumps(request["headers"]))
            print(json.dumps({"status": "succeeded", "payload": "x"}))
            """, fetch: false, extra: #", "accept": "text/csv""#)
        w.write("config.json", #"{"userAgent": "acme/1", "hosts": {"127.0.0.1": {"headers": {"x-api-key": "{env:RUNNER_TEST_KEY}", "x-both": "config"}}}}"#)
        w.write("job.json", #"{"kind": "prog", "name": "h", "url": "\#(w.base)/x", "headers": {"x-both": "job", "Authorization": "Bearer {env:RUNNER_TEST_TOKEN}"}}"#)
        let result = try await RunnerBinary.runExecutable(
            RunnerBinary.path, ["run", "job.json", "--kinds", "k", "--config", "config.json"], in: w.root,
            environment: ["RUNNER_TEST_KEY": "k1", "RUNNER_TEST_TOKEN": "t1"])
        #expect(result.status == 0, "\(result.stderr)")
        let headers = try JSONParser.parse(try #require(w.payload("progs/h.txt")))
        #expect(headers == .object([
            ("User-Agent", .string("acme/1")), ("Accept", .string("text/csv")), ("x-api-key", .string("k1")),
            ("x-both", .string("job")), ("Authorization", .string("Bearer t1")),
        ]), "\(JSONWriter.string(headers))")
    }

    @Test func aProgramThatCannotBeRunIsRefusedWhenKindsLoad() async throws {
        let w = try Workspace()
        try FileManager.default.createDirectory(atPath: "\(w.root)/k", withIntermediateDirectories: true)
        w.write("k/plain.sh", "#!/bin/sh\necho '{}'\n")  // not executable
        w.write("job.json", #"{"kind": "entry", "id": "1", "url": "\#(w.base)/entries/{id}.json"}"#)
        let cases: [(exec: String, says: String)] = [
            (#"["pyhton3", "x.py"]"#, "names the program pyhton3, which is not an executable file in any folder of PATH"),
            (#"["./missing.sh"]"#, "names the program ./missing.sh, which does not exist"),
            (#"["./plain.sh"]"#, "names the program ./plain.sh, which is not executable (chmod +x)"),
        ]
        for (exec, says) in cases {
            w.write("k/bad.json", #"{"kind": "bad", "exec": \#(exec)}"#)
            for command in [["kinds"], ["validate", "job.json"], ["run", "job.json"]] {
                let result = try await w.run(command + ["--kinds", "k"])
                #expect(result.status == 2, "\(exec) \(command[0])")
                #expect(result.stderr.contains("k/bad.json: field 'exec' \(says)"), "\(exec) \(command[0]): \(result.stderr)")
            }
        }
        chmod("\(w.root)/k/plain.sh", 0o755)
        let runnable = try await w.run(["kinds", "--kinds", "k"])
        #expect(runnable.status == 0, "\(runnable.stderr)")
        #expect(w.server.totalRequests == 0)
    }

    @Test func exitStatusesAndBadAnswersEndTheJobAsDesigned() async throws {
        let w = try Self.workspace(program: """
            name = request["job"]["name"]
            if name == "temp":
                if request["attempt"] == 1:
                    sys.stderr.write("busy, try later\\n"); sys.exit(75)
                print(json.dumps({"status": "succeeded"}))
            elif name == "always-busy":
                sys.stderr.write("busy, try later\\n"); sys.exit(75)
            elif name == "exit3":
                sys.stderr.write("first line\\nthe last line\\n"); sys.exit(3)
            elif name == "notjson":
                print("hello")
            elif name == "two":
                print("{} {}")
            elif name == "huge":
                sys.stdout.write("[" + "0," * (9 << 20))
                sys.stdout.flush()
                time.sleep(30)
            elif name == "said-failed":
                print(json.dumps({"status": "failed", "error": "the table has no header"}))
            elif name == "said-notfound":
                print(json.dumps({"status": "notFound"}))
            elif name == "flood":
                sys.stderr.write(("x" * 1000 + "\\n") * 3000); sys.stderr.flush()
                print(json.dumps({"status": "succeeded"}))
            """)
        var jobs: [String] = []
        for name in ["temp", "always-busy", "exit3", "notjson", "two", "huge", "said-failed", "said-notfound", "flood"] {
            jobs.append(#"{"kind": "prog", "name": "\#(name)", "retries": 1, "timeout": 20, "url": "\#(w.base)/bytes/10"}"#)
        }
        w.write("jobs.jsonl", jobs.joined(separator: "\n"))
        let result = try await w.run(["run", "jobs.jsonl", "--kinds", "k"])
        #expect(result.status == 1)
        #expect(try w.status("prog:temp") == "succeeded")
        #expect(try w.record("prog:temp")["attempts"] == .number(2))
        #expect(try w.status("prog:exit3") == "failed")
        #expect(try w.record("prog:exit3")["error"] == .string("the program python3 exited 3: the last line"))
        #expect(try w.record("prog:exit3")["attempts"] == .number(1), "exit 3 is not retried")
        #expect(try w.record("prog:always-busy")["error"] == .string(
            "still failing after 2 attempts: the program python3 reported a temporary failure (exit 75): busy, try later"))
        #expect(try w.record("prog:notjson")["error"]?.stringValue?.contains("not one JSON object") == true)
        #expect(try w.record("prog:two")["error"]?.stringValue?.contains("not one JSON object") == true)
        #expect(try w.record("prog:huge")["error"] == .string("the program's answer is larger than 16 MiB"))
        #expect(try w.record("prog:said-failed")["error"] == .string("the table has no header"))
        #expect(try w.status("prog:said-notfound") == "notFound")
        #expect(try w.status("prog:flood") == "succeeded", "a program filling stderr blocks nothing")
    }

    @Test func aProgramWithoutFetchStoresWhatItWritesAtomically() async throws {
        let w = try Self.workspace(program: """
            path = os.path.join(request["workdir"], "made.txt")
            with open(path, "w") as f: f.write("made by " + request["job"]["name"])
            answer = {"status": "succeeded", "payload": "made.txt", "details": {"fetched": "payload" in request}}
            if request["job"]["name"] == "escape": answer["payload"] = "/etc/hostname"
            if request["job"]["name"] == "none": del answer["payload"]
            print(json.dumps(answer))
            """, fetch: false)
        w.write("jobs.jsonl", """
            {"kind": "prog", "name": "mine", "url": "\(w.base)/nothing-fetched"}
            {"kind": "prog", "name": "escape", "url": "\(w.base)/nothing-fetched"}
            {"kind": "prog", "name": "none", "url": "\(w.base)/nothing-fetched"}
            """)
        let result = try await w.run(["run", "jobs.jsonl", "--kinds", "k"])
        #expect(result.status == 1)
        #expect(w.payload("progs/mine.txt") == Array("made by mine".utf8))
        #expect(try w.record("prog:mine")["details"]?["fetched"] == .bool(false))
        #expect(try w.record("prog:mine")["sha256"] == .string(SHA256.hex(Array("made by mine".utf8))))
        #expect(try w.record("prog:mine")["httpStatus"] == .null, "no HTTP response: the program did the work")
        #expect(try w.record("prog:escape")["error"]?.stringValue?.contains("not inside its work folder") == true)
        #expect(try w.record("prog:none")["error"]?.stringValue?.contains("named no payload") == true)
        #expect(w.leftovers().isEmpty)
    }

    @Test func aProgramThatExitsWithoutReadingItsInputEndsOnlyItsJob() async throws {
        let w = try Workspace()
        try FileManager.default.createDirectory(atPath: "\(w.root)/k", withIntermediateDirectories: true)
        w.write("k/deaf.json", """
            {"kind": "deaf", "parameters": {"text": {"type": "string", "required": true}}, "key": "deaf:{text}",
             "exec": ["sh", "-c", "echo nothing read >&2; exit 4"], "fetch": false}
            """)
        let big = String(repeating: "x", count: 400_000)
        var jobs: [String] = []
        for i in 0..<20 { jobs.append(#"{"kind": "deaf", "text": "\#(i)\#(big)", "key": "deaf:\#(i)", "url": "\#(w.base)/x"}"#) }
        w.write("jobs.jsonl", jobs.joined(separator: "\n"))
        let result = try await w.run(["run", "jobs.jsonl", "--kinds", "k"])
        #expect(result.status == 4, "the runner itself survives: \(result.status) \(result.stderr.suffix(300))")
        for i in 0..<20 { #expect(try w.record("deaf:\(i)")["error"] == .string("the program sh exited 4: nothing read")) }
    }

    /// The program ignores SIGTERM and starts a grandchild; both are gone when the job ends.
    static let stubborn = """
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen(["sleep", "300"])
        with open(os.path.join("..", "pids-" + request["job"]["name"]), "w") as f: f.write("%d %d" % (os.getpid(), child.pid))
        time.sleep(300)
        """

    static func pids(_ w: Workspace, _ name: String) -> [pid_t] {
        guard let data = FileManager.default.contents(atPath: "\(w.root)/pids-\(name)") else { return [] }
        return String(decoding: data, as: UTF8.self).split(separator: " ").compactMap { pid_t($0) }
    }

    @Test func atTheDeadlineTheProgramAndWhatItStartedAreKilledAndTheJobTimesOut() async throws {
        let w = try Self.workspace(program: Self.stubborn)
        // Time for python3 to start and write its pids on a loaded machine, before the deadline.
        w.write("job.json", #"{"kind": "prog", "name": "slow", "timeout": 5, "url": "\#(w.base)/bytes/10"}"#)
        let started = ContinuousClock.now
        let result = try await w.run(["run", "job.json", "--kinds", "k"])
        let took = started.duration(to: .now)
        #expect(result.status == 4, "\(result.stderr)")
        #expect(try w.status("prog:slow") == "timedOut")
        #expect(try w.record("prog:slow")["error"] == .string("the program python3 did not answer within the deadline of 5 s"))
        #expect(took < .seconds(15), "took \(took); the program, left alone, sleeps 300 s")
        let pids = Self.pids(w, "slow")
        #expect(pids.count == 2, "the program wrote its pids")
        for pid in pids { #expect(!Self.alive(pid), "process \(pid) outlived its job") }
    }

    @Test func aCancelEndsTheProgramAndTheJobIsCancelled() async throws {
        let w = try Self.workspace(program: Self.stubborn)
        w.write("job.json", #"{"kind": "prog", "name": "cancel", "timeout": 60, "url": "\#(w.base)/bytes/10"}"#)
        let result = try await w.run(["run", "job.json", "--kinds", "k"]) { process in
            for _ in 0..<400 where Self.pids(w, "cancel").count < 2 { try? await Task.sleep(for: .milliseconds(25)) }
            kill(process.processIdentifier, SIGINT)
        }
        #expect(result.status == 130, "\(result.stderr)")
        #expect(try w.status("prog:cancel") == "cancelled")
        let pids = Self.pids(w, "cancel")
        #expect(pids.count == 2)
        for pid in pids { #expect(!Self.alive(pid), "process \(pid) outlived its job") }
    }
}
