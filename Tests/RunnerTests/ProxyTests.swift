import FixtureServer
import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// Proxies come from the usual environment variables, as libcurl reads them: a job whose URL
/// names a port where nothing listens succeeds when `http_proxy` names the fixture server, which
/// counts the request as a proxied one (it arrives in absolute form, RFC 9112 section 3.2.2);
/// `no_proxy` sends it straight to its host again. With `https_proxy`, an https job reaches nginx
/// through the fixture server's CONNECT tunnel, and nginx's certificate is verified all the same.
/// The jobs' host is `localhost`, which resolves from /etc/hosts: no name lookup leaves the machine.
@Suite(.startsProcesses, .timeLimit(.minutes(1)))
struct ProxyTests {
    @Test(arguments: ["curl", "urlsession"])
    func aJobGoesThroughTheProxyThatHttpProxyNames(http: String) async throws {
        let w = try Workspace()
        let closed = try LoopbackPort()
        w.write("job.json", #"{"kind": "entry", "id": "imgly.A.1", "key": "proxied", "url": "http://localhost:\#(closed.port)/entries/{id}.json"}"#)

        // Without a proxy, nothing answers at that port.
        let direct = try await run(w, ["run", "job.json", "--http", http], proxy: nil)
        #expect(direct.status == 4, "\(direct.stdout)\(direct.stderr)")
        #expect(try w.status("proxied") == "failed")
        #expect(w.server.totalRequests == 0)

        let proxied = try await run(w, ["run", "job.json", "--http", http], proxy: w.base)
        #expect(proxied.status == 0, "\(proxied.stdout)\(proxied.stderr)")
        let record = try w.record("proxied")
        #expect(record["status"] == .string("succeeded"), "\(record)")
        #expect(record["url"] == .string("http://localhost:\(closed.port)/entries/imgly.A.1.json"), "the record keeps the job's URL")
        let payload = record["output"]?.stringValue.flatMap(w.payload)
        #expect(payload.map { String(decoding: $0, as: UTF8.self) } == FixtureCatalog.entryJSON(id: "imgly.A.1"))
        #expect(w.server.proxiedRequests == 1, "the request reached the fixture server as a proxy request")
        #expect(w.server.requestCount(path: "/entries/imgly.A.1.json") == 1)
    }

    /// Through a proxy the socket goes to the proxy, so the policy also judges an address written
    /// in the URL: the unspecified address 0.0.0.0 is refused by default, and the proxy (which
    /// would serve the path) hears nothing. Nothing is sent to 0.0.0.0 either way.
    @Test func anAddressInTheURLIsJudgedEvenThroughAProxy() async throws {
        let w = try Workspace()
        let closed = try LoopbackPort()
        w.write("job.json", #"{"kind": "entry", "id": "imgly.A.1", "key": "literal", "url": "http://0.0.0.0:\#(closed.port)/entries/{id}.json"}"#)
        let result = try await run(w, ["run", "job.json", "--http", "curl"], proxy: w.base)
        #expect(result.status == 4, "\(result.stdout)\(result.stderr)")
        let record = try w.record("literal")
        #expect(record["status"] == .string("failed"))
        #expect(record["error"]?.stringValue?.contains("0.0.0.0") == true, "the refusal names the address: \(record)")
        #expect(w.server.totalRequests == 0, "the proxy was not asked")
    }

    /// A host that cannot resolve (`.invalid`, RFC 6761): only the proxy can have answered. libcurl
    /// hands the name to the proxy and looks up nothing but the proxy's address. Not run on
    /// URLSession: its address check looks the job's host up before the request, which for this
    /// name would send a DNS query off the machine.
    @Test func onCurlAJobsHostIsNotLookedUpBehindTheProxy() async throws {
        let w = try Workspace()
        w.write("job.json", #"{"kind": "entry", "id": "imgly.A.1", "key": "unresolvable", "url": "http://runner-proxy-test.invalid/entries/{id}.json"}"#)
        let result = try await run(w, ["run", "job.json", "--http", "curl"], proxy: w.base)
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(try w.status("unresolvable") == "succeeded")
        #expect(w.server.proxiedRequests == 1)
    }

    @Test(arguments: ["curl", "urlsession"])
    func noProxyNamesTheHostsThatGoStraight(http: String) async throws {
        let w = try Workspace()
        let closed = try LoopbackPort()
        w.write("job.json", #"{"kind": "entry", "id": "imgly.A.1", "key": "straight", "url": "http://localhost:\#(closed.port)/entries/{id}.json"}"#)
        let result = try await run(w, ["run", "job.json", "--http", http], proxy: w.base, noProxy: "localhost")
        #expect(result.status == 4, "\(result.stdout)\(result.stderr)")
        #expect(try w.status("straight") == "failed")
        #expect(w.server.totalRequests == 0, "no_proxy kept the request away from the proxy")
    }

    // MARK: - https_proxy: a CONNECT tunnel to nginx

    @Test(arguments: ["curl", "urlsession"])
    func anHTTPSJobGoesThroughTheTunnelThatHttpsProxyNamesAndTLSIsStillVerifiedEndToEnd(http: String) async throws {
        let t = try await TLSWorld()
        t.w.write("job.json", t.job(key: "tunnelled"))
        let result = try await t.run(["run", "job.json", "--http", http], environment: ["https_proxy": t.w.base, "no_proxy": "", "NO_PROXY": ""])
        #expect(result.status == 4, "\(result.stdout)\(result.stderr)")
        let record = try t.w.record("tunnelled")
        #expect(record["status"] == .string("failed"))
        #expect(record["error"]?.stringValue?.lowercased().contains("certificate") == true, "nginx's certificate, seen through the tunnel: \(record)")
        #expect(t.w.server.tunnels == 1, "the connection went through the proxy")
        #expect(t.nginx.accessLog().isEmpty)
    }

    @Test func anHTTPSJobWithTheCASucceedsThroughTheTunnel() async throws {
        let t = try await TLSWorld()
        t.w.write("job.json", t.job(key: "tunnelled"))
        let result = try await t.run(
            ["run", "job.json", "--http", "curl", "--cacert", "pki/ca.pem"], environment: ["https_proxy": t.w.base, "no_proxy": "", "NO_PROXY": ""])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(try t.w.status("tunnelled") == "succeeded")
        #expect(try t.payload(of: "tunnelled") == Array(TLSWorld.entryJSON.utf8))
        #expect(t.w.server.tunnels == 1)
        #expect(t.nginx.accessLog().count == 1, "\(t.nginx.accessLog())")
    }

    // MARK: - Support

    /// Runs the runner with `http_proxy` set to `proxy` (unset: empty) and `no_proxy` to
    /// `noProxy`, whatever the machine's environment holds.
    private func run(_ w: Workspace, _ arguments: [String], proxy: String?, noProxy: String = "") async throws -> RunnerBinary.Output {
        let environment = [
            "http_proxy": proxy ?? "", "https_proxy": "", "HTTPS_PROXY": "", "all_proxy": "", "ALL_PROXY": "",
            "no_proxy": noProxy, "NO_PROXY": noProxy,
        ]
        return try await RunnerBinary.runExecutable(RunnerBinary.path, arguments, in: w.root, environment: environment)
    }
}
