import FixtureServer
import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// TLS end to end: the real binary against nginx (Debian's package) with certificates from a CA
/// the test makes and the system does not trust. Verification is never turned off: without that
/// CA a job fails naming the certificate; `--cacert` or a host's `cacert` in the config makes it
/// succeed; where the server requires a client certificate, only one the config gives for that
/// host, signed by the CA the server trusts, gets through. The URLSession client cannot use
/// another CA on Linux and refuses these options up front.
///
/// The jobs that use the options run on the curl client (`--http curl`) whatever `RUNNER_HTTP`
/// says; the refusal is tested on URLSession explicitly.
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(2)))
struct TLSTests {
    // MARK: - Server verification

    @Test(arguments: ["curl", "urlsession"])
    func withoutTheCATheJobFailsNamingTheCertificateAndWritesNothing(http: String) async throws {
        let t = try await TLSWorld()
        t.w.write("job.json", t.job(key: "untrusted"))
        let result = try await t.run(["run", "job.json", "--http", http])
        #expect(result.status == 4, "\(result.stderr)")
        let record = try t.w.record("untrusted")
        #expect(record["status"] == .string("failed"))
        let error = record["error"]?.stringValue ?? ""
        #expect(error.lowercased().contains("certificate"), "the error names the certificate: \(error)")
        #expect(record["output"] == .null)
        #expect(!t.w.outputFiles().contains { $0.hasPrefix("entries/") }, "\(t.w.outputFiles())")
        #expect(t.nginx.accessLog().isEmpty, "no request went over the unverified connection: \(t.nginx.accessLog())")
    }

    /// A burst of jobs to a new HTTP/2 origin shares the one connection the first of them sets up,
    /// as curl --parallel does (without holding them, each opened its own: 20 connections).
    @Test func aBurstToAnHTTP2OriginSharesOneConnection() async throws {
        let t = try await TLSWorld()
        let jobs = (1...20).map { #"{"kind": "entry", "id": "1", "key": "h2-\#($0)", "url": "https://localhost:\#(t.nginx.http2Port)/entries/{id}.json?n=\#($0)"}"# }
        t.w.write("jobs.jsonl", jobs.joined(separator: "\n"))
        let result = try await t.run(["run", "jobs.jsonl", "--http", "curl", "--cacert", "pki/ca.pem", "--concurrency", "20", "--per-host", "20"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let log = t.nginx.accessLog().filter { $0.hasPrefix("\(t.nginx.http2Port) ") }
        #expect(log.count == 20 && log.allSatisfy { $0.hasSuffix(" HTTP/2.0") }, "\(log)")
        let connections = Set(log.compactMap { $0.split(separator: " ").dropLast().last })
        #expect(connections.count == 1, "one connection for the burst: \(log)")

        // Over HTTP/1.1 the burst is not held for long: every job ends, each on a connection of its own.
        let plain = (1...6).map { #"{"kind": "entry", "id": "1", "key": "h1-\#($0)", "url": "\#(t.url())?n=\#($0)"}"# }
        t.w.write("plain.jsonl", plain.joined(separator: "\n"))
        let second = try await t.run(["run", "plain.jsonl", "--http", "curl", "--cacert", "pki/ca.pem"])
        #expect(second.status == 0, "\(second.stdout)\(second.stderr)")
        let h1 = t.nginx.accessLog().filter { $0.hasPrefix("\(t.nginx.port) ") }
        #expect(h1.count == 6 && h1.allSatisfy { $0.hasSuffix(" HTTP/1.1") }, "\(h1)")
    }

    @Test func withCacertTheJobSucceedsByNameAndByAddress() async throws {
        let t = try await TLSWorld()
        t.w.write("jobs.json", "[\(t.job(key: "by-name")), \(t.job(key: "by-address", host: "127.0.0.1"))]")
        let result = try await t.run(["run", "jobs.json", "--http", "curl", "--cacert", "pki/ca.pem"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        for key in ["by-name", "by-address"] {
            let record = try t.w.record(key)
            #expect(record["status"] == .string("succeeded"), "\(record)")
            #expect(record["httpStatus"]?.intValue == 200)
            #expect(try t.payload(of: key) == Array(TLSWorld.entryJSON.utf8), "\(key): the payload is what nginx served")
        }
        #expect(t.nginx.accessLog().count == 2, "\(t.nginx.accessLog())")
    }

    @Test func aRedirectFromHTTPSToHTTPIsRefusedAndNothingIsSentToIt() async throws {
        let t = try await TLSWorld()
        let url = "https://localhost:\(t.nginx.port)/to-http?port=\(t.w.server.port)"
        t.w.write("job.json", #"{"kind": "entry", "id": "imgly.A.1", "key": "down", "url": "\#(url)"}"#)
        let result = try await t.run(["run", "job.json", "--http", "curl", "--cacert", "pki/ca.pem"])
        #expect(result.status == 4, "\(result.stdout)\(result.stderr)")
        let record = try t.w.record("down")
        #expect(record["status"] == .string("failed"))
        #expect(record["error"]?.stringValue?.contains("from https to http") == true, "\(record)")
        #expect(t.nginx.accessLog().count == 1, "the https request was made: \(t.nginx.accessLog())")
        #expect(t.w.server.totalRequests == 0, "nothing went out over plain http")
    }

    @Test func theCABundleOfAnotherCAIsNoTrust() async throws {
        let t = try await TLSWorld()
        t.w.write("job.json", t.job(key: "wrong-ca"))
        let result = try await t.run(["run", "job.json", "--http", "curl", "--cacert", "pki/other-ca.pem"])
        #expect(result.status == 4, "\(result.stderr)")
        let record = try t.w.record("wrong-ca")
        #expect(record["status"] == .string("failed"))
        #expect(record["error"]?.stringValue?.lowercased().contains("certificate") == true, "\(record)")
        #expect(try t.payload(of: "wrong-ca") == nil)
        #expect(t.nginx.accessLog().isEmpty)
    }

    @Test func aHostsCacertInTheConfigIsFoundBesideTheConfigAndServesThatHostOnly() async throws {
        let t = try await TLSWorld()
        // "ca.pem" is relative: it is the one beside the config (pki/), not in the folder the runner runs in.
        let config = try t.writeConfig("pki/runner.json", hosts: ["localhost": ["cacert": "ca.pem"]])
        t.w.write("jobs.json", "[\(t.job(key: "configured")), \(t.job(key: "other-host", host: "127.0.0.1"))]")
        let result = try await t.run(["run", "--config", "pki/runner.json", "jobs.json", "--http", "curl"])
        #expect(result.status == 1, "one job fails: \(result.stdout)\(result.stderr)")
        let configured = try t.w.record("configured")
        #expect(configured["status"] == .string("succeeded"), "\(configured)")
        #expect(try t.payload(of: "configured") == Array(TLSWorld.entryJSON.utf8))
        let other = try t.w.record("other-host")
        #expect(other["status"] == .string("failed"), "127.0.0.1 has no cacert of its own: \(other)")
        #expect(other["error"]?.stringValue?.lowercased().contains("certificate") == true, "\(other)")

        // The same config through $RUNNER_CONFIG.
        t.w.write("again.json", t.job(key: "from-environment"))
        let again = try await t.run(["run", "again.json", "--http", "curl"], environment: ["RUNNER_CONFIG": config])
        #expect(again.status == 0, "\(again.stdout)\(again.stderr)")
        #expect(try t.w.status("from-environment") == "succeeded")
    }

    @Test func aHostsOwnCacertWinsOverTheCacertOption() async throws {
        let t = try await TLSWorld()
        try t.writeConfig("pki/runner.json", hosts: ["localhost": ["cacert": "ca.pem"]])
        t.w.write("jobs.json", "[\(t.job(key: "own-ca")), \(t.job(key: "option-ca", host: "127.0.0.1"))]")
        let result = try await t.run(["run", "--config", "pki/runner.json", "--cacert", "pki/other-ca.pem", "jobs.json", "--http", "curl"])
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        let own = try t.w.record("own-ca")
        #expect(own["status"] == .string("succeeded"), "localhost uses its own CA: \(own)")
        let option = try t.w.record("option-ca")
        #expect(option["status"] == .string("failed"), "127.0.0.1 uses --cacert, the wrong CA: \(option)")
    }

    // MARK: - Client certificates

    @Test func onlyTheClientCertificateConfiguredForTheHostGetsThrough() async throws {
        let t = try await TLSWorld()
        t.w.write("job.json", t.job(key: "client-cert", clientCertificate: true))
        let port = "\(t.nginx.clientCertificatePort)"

        // Without a client certificate: nginx answers 400.
        try t.writeConfig("pki/none.json", hosts: ["localhost": ["cacert": "ca.pem"]])
        let none = try await t.run(["run", "--config", "pki/none.json", "job.json", "--http", "curl"])
        #expect(none.status == 4, "\(none.stdout)\(none.stderr)")
        #expect(try t.w.status("client-cert") == "failed")
        #expect(try t.payload(of: "client-cert") == nil)

        // With a client certificate from the other CA: refused too.
        try t.writeConfig("pki/other.json", hosts: ["localhost": ["cacert": "ca.pem", "cert": "other-client.pem", "key": "other-client.key"]])
        let other = try await t.run(["run", "--config", "pki/other.json", "job.json", "--http", "curl"])
        #expect(other.status == 4, "\(other.stdout)\(other.stderr)")
        #expect(try t.w.status("client-cert") == "failed")
        #expect(try t.payload(of: "client-cert") == nil)

        // With the configured one, for localhost only: 127.0.0.1 presents none.
        try t.writeConfig("pki/mine.json", hosts: [
            "localhost": ["cacert": "ca.pem", "cert": "client.pem", "key": "client.key"],
            "127.0.0.1": ["cacert": "ca.pem"],
        ])
        t.w.write("both.json", "[\(t.job(key: "client-cert", clientCertificate: true)), \(t.job(key: "no-cert-here", host: "127.0.0.1", clientCertificate: true))]")
        let mine = try await t.run(["run", "--config", "pki/mine.json", "both.json", "--http", "curl"])
        #expect(mine.status == 1, "\(mine.stdout)\(mine.stderr)")
        let configured = try t.w.record("client-cert")
        #expect(configured["status"] == .string("succeeded"), "\(configured)")
        #expect(try t.payload(of: "client-cert") == Array(TLSWorld.entryJSON.utf8))
        #expect(try t.w.status("no-cert-here") == "failed")

        // nginx's own account of what each request presented.
        let log = t.nginx.accessLog().filter { $0.hasPrefix(port + " ") }
        #expect(log.count == 4, "\(log)")
        #expect(log.first?.hasPrefix(#"\#(port) NONE "-" 400 /entries/1.json "#) == true, "\(log)")
        #expect(log.dropFirst().first?.hasPrefix(#"\#(port) FAILED:"#) == true, "\(log)")
        #expect(log.dropFirst().first?.contains("CN=runner other client") == true, "\(log)")
        #expect(log.contains { $0.hasPrefix(#"\#(port) SUCCESS "CN=runner test client" 200 /entries/1.json "#) }, "\(log)")
        #expect(log.filter { $0.contains(" 200 ") }.count == 1, "\(log)")
    }

    // MARK: - URLSession

    @Test(arguments: [
        (["--http", "urlsession", "--cacert", "pki/ca.pem"], [String: String]()),
        (["--cacert", "pki/ca.pem"], ["RUNNER_HTTP": "urlsession"]),
        (["--http", "urlsession", "--config", "pki/cacert.json"], [:]),
        (["--http", "urlsession", "--config", "pki/client.json"], [:]),
    ])
    func urlSessionRefusesACABundleOrAClientCertificateUpFront(options: [String], environment: [String: String]) async throws {
        let t = try await TLSWorld()
        try t.writeConfig("pki/cacert.json", hosts: ["localhost": ["cacert": "ca.pem"]])
        try t.writeConfig("pki/client.json", hosts: ["localhost": ["cert": "client.pem", "key": "client.key"]])
        t.w.write("job.json", t.job(key: "refused"))
        let result = try await t.run(["run", "job.json"] + options, environment: environment)
        #expect(result.status == 2, "\(result.stdout)\(result.stderr)")
        let lines = result.stderr.split(separator: "\n")
        let error = lines.first { $0.lowercased().contains("urlsession") && $0.contains("cert") }
        #expect(error != nil, "one line names URLSession and the option it cannot honour: \(result.stderr)")
        #expect(t.w.outputFiles().isEmpty, "nothing ran: \(t.w.outputFiles())")
        #expect(t.nginx.accessLog().isEmpty)
    }
}
