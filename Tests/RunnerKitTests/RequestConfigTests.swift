import Foundation
@testable import RunnerKit
import Testing

/// Secret references, origins, and which host settings a request gets.
struct RequestConfigTests {
    @Test func referencesExpandOnlyWhenAsked() throws {
        let header = try HeaderTemplate(name: "Authorization", value: "Bearer {env:TOKEN} and {not-a-ref} {env:OTHER}")
        #expect(header.references == ["{env:TOKEN}", "{env:OTHER}"])
        #expect(try header.expand(environment: ["TOKEN": "t", "OTHER": "o"]) == "Bearer t and {not-a-ref} o")
        #expect(throws: HeaderTemplate.Problem(header: "Authorization", reason: "the environment variable OTHER is not set")) {
            try header.expand(environment: ["TOKEN": "t"])
        }
        #expect(throws: HeaderTemplate.Problem.self) { try header.expand(environment: ["TOKEN": "a\r\nx-injected: 1", "OTHER": "o"]) }
        #expect(try HeaderTemplate(name: "x", value: "{plain}").expand(environment: [:]) == "{plain}")
    }

    @Test func aFileReferenceDropsOneTrailingNewlineAndResolvesAgainstItsFolder() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("refs-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        _ = FileManager.default.createFile(atPath: "\(folder)/key", contents: Data("abc\r\n".utf8))
        _ = FileManager.default.createFile(atPath: "\(folder)/two", contents: Data("a\nb".utf8))
        let key = try HeaderTemplate(name: "x-api-key", value: "{file:key}", folder: folder)
        #expect(try key.expand(environment: [:]) == "abc")
        #expect(key.references == ["{file:\(folder)/key}"])
        let two = try HeaderTemplate(name: "x", value: "{file:\(folder)/two}")
        #expect(throws: HeaderTemplate.Problem(header: "x", reason: "the file \(folder)/two holds more than one line (or a NUL)")) {
            try two.expand(environment: [:])
        }
        let gone = try HeaderTemplate(name: "x", value: "{file:\(folder)/gone}")
        #expect(throws: HeaderTemplate.Problem.self) { try gone.check(environment: [:]) }
    }

    @Test func malformedHeadersAreRefused() {
        #expect(throws: HeaderTemplate.Problem.self) { try HeaderTemplate(name: "bad name", value: "v") }
        #expect(throws: HeaderTemplate.Problem.self) { try HeaderTemplate(name: "", value: "v") }
        #expect(throws: HeaderTemplate.Problem.self) { try HeaderTemplate(name: "x", value: "a\nb") }
        #expect(throws: HeaderTemplate.Problem.self) { try HeaderTemplate(name: "x", value: "{env:1X}") }
        #expect(throws: HeaderTemplate.Problem.self) { try HeaderTemplate(name: "x", value: "{env:X") }
        #expect(throws: HeaderTemplate.Problem.self) { try HeaderTemplate(name: "x", value: "{file:}") }
    }

    @Test func originsCompareSchemeHostAndEffectivePort() throws {
        func origin(_ text: String) throws -> Origin { Origin(try #require(URL(string: text))) }
        #expect(try origin("https://API.example.com/a") == origin("https://api.example.com:443/b?c"))
        #expect(try origin("http://example.com/") == origin("http://example.com:80/x"))
        #expect(try origin("http://example.com/") != origin("https://example.com/"))
        #expect(try origin("http://example.com:8080/") != origin("http://example.com/"))
        #expect(try origin("http://a.example.com/") != origin("http://b.example.com/"))
    }

    @Test func theMostSpecificHostPatternWins() throws {
        let config = RequestConfig(
            hosts: [
                (try HostPattern(parsing: "*.example.com"), HostSettings(rate: 1)),
                (try HostPattern(parsing: "*.api.example.com"), HostSettings(rate: 2)),
                (try HostPattern(parsing: "eu.api.example.com"), HostSettings(rate: 3)),
            ], rate: 9)
        #expect(config.rate(forHost: "eu.api.example.com") == 3)
        #expect(config.rate(forHost: "us.api.example.com") == 2)
        #expect(config.rate(forHost: "cdn.example.com") == 1)
        #expect(config.rate(forHost: "example.com") == 9, "a suffix pattern names what is below it only")
        #expect(config.settings(forHost: "other.org") == nil)
    }

    @Test func aHopGetsItsOwnHostsHeadersAndTheRequestsOnlyOnItsOrigin() throws {
        let url = try #require(URL(string: "https://api.example.com/v1/x"))
        let config = RequestConfig(hosts: [
            (try HostPattern(parsing: "api.example.com"), HostSettings(headers: [try HeaderTemplate(name: "x-api-key", value: "config")])),
            (try HostPattern(parsing: "cdn.example.net"), HostSettings(headers: [try HeaderTemplate(name: "x-cdn", value: "c")])),
        ])
        let request = FetchRequest(
            url: url, headers: [("Accept", "application/json")], originHeaders: [("Authorization", "job"), ("x-api-key", "job")],
            maxBytes: 1)
        func names(_ hop: String) throws -> [String] {
            let hopURL = try #require(URL(string: hop))
            return try config.headers(of: request, hop: hopURL, settings: config.settings(forHost: hopURL.host ?? ""))
                .map { "\($0.name)=\($0.value)" }
        }
        #expect(try names("https://api.example.com/v2") == ["Accept=application/json", "Authorization=job", "x-api-key=job"])
        #expect(try names("http://api.example.com/v2") == ["Accept=application/json", "x-api-key=config"])
        #expect(try names("https://cdn.example.net/i") == ["Accept=application/json", "x-cdn=c"])
        #expect(try names("https://elsewhere.org/") == ["Accept=application/json"])
    }

    /// A config file's `hosts`, read from a file as `--config` reads it.
    static func config(_ hosts: String, environment: [String: String] = [:]) throws -> RequestConfig {
        let path = NSTemporaryDirectory() + "runner-config-\(UUID().uuidString).json"
        try Data(#"{"hosts": \#(hosts)}"#.utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try RequestConfig(contentsOf: path, environment: environment)
    }

    static func refusal(_ hosts: String, environment: [String: String] = [:]) -> String {
        do {
            _ = try config(hosts, environment: environment)
            return "taken"
        } catch {
            return "\(error)"
        }
    }

    @Test func aHostsEntryWithAPortBindsItsHeadersToThatPortOnly() throws {
        let config = try Self.config("""
            {"api.example.com:8443": {"headers": {"x": "port"}}, "api.example.com": {"headers": {"x": "any"}},
             "[2001:db8::1]:8080": {"headers": {"x": "v6"}}, "192.0.2.7:81": {"headers": {"x": "v4"}},
             "*.example.org:443": {"headers": {"x": "suffix"}}}
            """)
        func value(_ url: String) throws -> String? {
            config.settings(for: try #require(URL(string: url)))?.headers.first?.value
        }
        #expect(try value("https://api.example.com:8443/") == "port")
        #expect(try value("https://api.example.com/") == "any", "an entry without a port covers every other port")
        #expect(try value("http://api.example.com:8080/") == "any")
        #expect(try value("http://[2001:db8::1]:8080/") == "v6")
        #expect(try value("http://[2001:db8::1]/") == nil)
        #expect(try value("http://192.0.2.7:81/") == "v4")
        #expect(try value("http://192.0.2.7/") == nil)
        #expect(try value("https://a.example.org/") == "suffix", "443 is https's own port")
        #expect(try value("http://a.example.org/") == nil)
        #expect(config.settings(forHost: "api.example.com")?.headers.first?.value == "any", "without a port: entries without one")
    }

    @Test func hostsErrorsListOnlyTheFormsAHostsEntryTakes() {
        for key in ["10.0.0.0/8", "bad host", "a..b", "[::1", "host:", "host:0", "host:65536", "host:8o"] {
            let refused = Self.refusal(#"{"\#(key)": {}}"#)
            #expect(refused != "taken", "\(key)")
            #expect(!refused.contains("CIDR"), "\(key): \(refused)")
            #expect(refused.contains("':port'") || refused.contains("the port must be a number from 1 to 65535"), "\(key): \(refused)")
        }
        #expect(Self.refusal(#"{"api.example.com:8443": {"rate": 2}}"#).contains("rate, perHost and limitRate count per host"))
        #expect(Self.refusal(#"{"api.example.com:8443": {"perHost": 2}}"#).contains("rate, perHost and limitRate count per host"))
    }

    @Test func anEmptyEnvironmentVariableIsRefusedLikeAnUnsetOne() throws {
        let hosts = #"{"api.example.com": {"headers": {"Authorization": "Bearer {env:TOKEN}"}}}"#
        #expect(Self.refusal(hosts, environment: ["TOKEN": ""]).contains("the environment variable TOKEN is set but empty"))
        #expect(Self.refusal(hosts, environment: [:]).contains("the environment variable TOKEN is not set"))
        #expect(Self.refusal(hosts, environment: ["TOKEN": "t"]) == "taken")
    }

    @Test func entriesThatNameNoContactedHostAreListedAsWritten() throws {
        let config = try Self.config(#"{"used.example.com": {}, "*.cdn.example": {}, "idle.example.com:8443": {}, "[2001:db8::2]:80": {}}"#)
        #expect(Set(config.entries(namingNoneOf: ["used.example.com", "a.cdn.example"])) == ["idle.example.com:8443", "[2001:db8::2]:80"])
        #expect(config.entries(namingNoneOf: ["used.example.com", "a.cdn.example", "idle.example.com", "2001:db8::2"]).isEmpty)
    }
}

/// The note of a 401 or 403: the quoted body, made printable.
struct RefusalNoteTests {
    @Test func aQuotedBodyHasNoControlCharactersAndStopsAt200Bytes() {
        #expect(JobContext.printable(Array("{\"error\":\n\t\"bad token\"}\u{1B}[31m".utf8)) == "{\"error\":  \"bad token\"} [31m")
        #expect(JobContext.printable(Array("é".utf8).prefix(1)) == "\u{FFFD}")
        #expect(JobContext.printable([]) == "")
        #expect(JobContext.quotedBodyBytes == 200)
    }
}
