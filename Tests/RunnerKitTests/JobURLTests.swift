import Foundation
import RunnerKit
import Testing

/// A job's URL: absolute http or https with a host, the host judged once percent-decoded.
@Suite struct JobURLTests {
    @Test(arguments: [
        "http://h/", "HTTPS://H:1/x?y#z", "http://[::1]:80/x", "http://%41/", "http://a%20b/", "http://u:p@h:1/",
        "http://127.0.0.1:18555/entries/e1.json", "http://[fe80::1%25eth0]/",
    ])
    func accepted(url: String) throws {
        #expect(try JobDescriptor.validateURL(url).absoluteString == url)
    }

    @Test(arguments: [
        ("http:///x", "has no host: 'http:///x'"),
        ("http://[]/", "has no host: 'http://[]/'"),
        ("http://:80/", "has no host: 'http://:80/'"),
        ("http://%FF/", "has no host: 'http://%FF/'"),
        ("http:h", "has no host: 'http:h'"),
        ("ftp://h/", "uses the scheme 'ftp'; only http and https are supported"),
        ("h/x", "is not a valid absolute URL: 'h/x'"),
        ("http://%zz/", "is not a valid absolute URL: 'http://%zz/'"),
    ])
    func refused(url: String, message: String) {
        #expect(throws: JobSpecError(field: "url", message)) { try JobDescriptor.validateURL(url) }
    }
}
