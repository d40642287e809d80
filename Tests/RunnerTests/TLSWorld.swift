import Foundation
import RunnerKit

/// The world of a TLS test: a workspace, a CA of the test's own (trusted by nothing on the
/// machine) with a server certificate for `localhost` and 127.0.0.1 and a client certificate, an
/// unrelated second CA with a client certificate of its own, and nginx serving one entry with
/// them (`TLSServer`). The certificates sit in `pki/` under the workspace, not in the folder the
/// runner runs in.
final class TLSWorld: @unchecked Sendable {
    /// The entry nginx serves at /entries/1.json: a valid `entry` payload.
    static let entryJSON = """
        {"id": "1", "createdAt": "2023-01-02T03:04:05.000Z", "createdBy": "du@ijdu.cm", \
        "lastModifiedAt": "2024-01-02T03:04:05.000Z", "lastModifiedBy": "pit@gon.bw", \
        "description": "Served over TLS with a certificate from a CA the system does not know."}

        """

    let w: Workspace
    let pki: String
    let ca: TestCA
    let otherCA: TestCA
    let client: TestCA.Issued
    let otherClient: TestCA.Issued
    let nginx: TLSServer

    init() async throws {
        w = try Workspace()
        pki = "\(w.root)/pki"
        try FileManager.default.createDirectory(atPath: pki, withIntermediateDirectories: true)
        ca = try await TestCA(name: "ca", commonName: "runner test CA", in: pki)
        otherCA = try await TestCA(name: "other-ca", commonName: "runner other CA", in: pki)
        let server = try await ca.issue("server", commonName: "localhost", use: .server(names: ["localhost"], addresses: ["127.0.0.1"]))
        client = try await ca.issue("client", commonName: "runner test client", use: .client)
        otherClient = try await otherCA.issue("other-client", commonName: "runner other client", use: .client)
        nginx = try await TLSServer(certificate: server, clientCA: ca.certificate, files: ["entries/1.json": Self.entryJSON])
    }

    deinit {
        nginx.stop()
    }

    /// The entry's URL template on the server-authenticated port, by host name (`localhost`) or
    /// by address (`127.0.0.1`); `clientCertificate` picks the port that requires one.
    func url(host: String = "localhost", clientCertificate: Bool = false) -> String {
        "https://\(host):\(clientCertificate ? nginx.clientCertificatePort : nginx.port)/entries/{id}.json"
    }

    /// An `entry` job for id 1 with this key.
    func job(key: String, host: String = "localhost", clientCertificate: Bool = false) -> String {
        #"{"kind": "entry", "id": "1", "key": "\#(key)", "url": "\#(url(host: host, clientCertificate: clientCertificate))"}"#
    }

    /// Writes a config file at `path` (under the workspace) holding `hosts`, and answers its path.
    @discardableResult
    func writeConfig(_ path: String, hosts: [String: [String: String]]) throws -> String {
        let entries = hosts.sorted { $0.key < $1.key }.map { host, settings in
            let fields = settings.sorted { $0.key < $1.key }.map { #""\#($0.key)": "\#($0.value)""# }
            return #""\#(host)": {\#(fields.joined(separator: ", "))}"#
        }
        let file = "\(w.root)/\(path)"
        try FileManager.default.createDirectory(
            atPath: URL(fileURLWithPath: file).deletingLastPathComponent().path, withIntermediateDirectories: true)
        try #"{"hosts": {\#(entries.joined(separator: ", "))}}"#.write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    /// Runs the runner in the workspace, with `environment` on top of the test's, and no proxy
    /// from the environment whatever the machine has, so the requests go straight to nginx.
    func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> RunnerBinary.Output {
        let noProxy = Dictionary(uniqueKeysWithValues: ["http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"].map { ($0, "") })
        return try await RunnerBinary.runExecutable(
            RunnerBinary.path, arguments, in: w.root, environment: noProxy.merging(environment) { $1 })
    }

    /// The payload the record of `key` points at, if any.
    func payload(of key: String) throws -> [UInt8]? {
        guard let output = try w.record(key)["output"]?.stringValue else { return nil }
        return w.payload(output)
    }
}
