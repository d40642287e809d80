import Foundation
import RunnerKinds
import RunnerKit
import Testing

/// The one placeholder scanner and the three templates on it: a URL's `{name}`, a kind file's
/// `{name}`, `{/pointer}` and doubled braces, a header's `{env:}` and `{file:}`.
@Suite struct TemplateTests {
    /// The pieces as text: `[t:…]`, `<…>` for a placeholder, `[u:…]` unclosed, `[}]` stray.
    static func pieces(_ template: String, doubledBraces: Bool = false, takes: @escaping (Substring) -> Bool = { _ in true }) -> String {
        var out = ""
        TemplateScanner.scan(template, doubledBraces: doubledBraces, read: { takes($0) ? $0 : nil }) { piece in
            switch piece {
            case .text(let text): out += "[t:\(text)]"
            case .placeholder(let name): out += "<\(name)>"
            case .unclosed(let rest): out += "[u:\(rest)]"
            case .strayClose: out += "[}]"
            }
        }
        return out
    }

    @Test func scannerCutsTextAndPlaceholders() {
        #expect(Self.pieces("a{b}c{d}") == "[t:a]<b>[t:c]<d>")
        #expect(Self.pieces("{x}") == "<x>")
        #expect(Self.pieces("") == "")
        #expect(Self.pieces("plain") == "[t:plain]")
        #expect(Self.pieces("a{}b") == "[t:a]<>[t:b]")
        #expect(Self.pieces("a}b") == "[t:a}b]")
        #expect(Self.pieces("a{b") == "[t:a][u:{b]")
        #expect(Self.pieces("é{ü}日") == "[t:é]<ü>[t:日]")
    }

    @Test func aPlaceholderNotTakenIsTextAndTheScanGoesOnAfterItsBrace() {
        let onlyB: (Substring) -> Bool = { $0 == "b" }
        #expect(Self.pieces("{a{b}", takes: onlyB) == "[t:{a]<b>")
        #expect(Self.pieces("{a}{b}", takes: onlyB) == "[t:{a}]<b>")
        #expect(Self.pieces("{a} {c", takes: onlyB) == "[t:{a} ][u:{c]")
    }

    @Test func doubledBracesAreOneBraceAndALoneCloseIsStray() {
        #expect(Self.pieces("{{a}}", doubledBraces: true) == "[t:{][t:a}]")
        #expect(Self.pieces("x{{{a}}}", doubledBraces: true) == "[t:x{]<a>[t:}]")
        #expect(Self.pieces("a}b", doubledBraces: true) == "[t:a][}][t:b]")
        #expect(Self.pieces("{{", doubledBraces: true) == "[t:{]")
        #expect(Self.pieces("a{b", doubledBraces: true) == "[t:a][u:{b]")
    }

    @Test func kindTemplatesReadEveryPlaceholderAndRefuseWhatIsNotOne() throws {
        let template = try KindTemplate("http://h/{{{id}}}/{/a/b}/{}")
        #expect(template.segments == [
            .literal("http://h/{"), .parameter("id"), .literal("}/"), .pointer(try JSONPointer("/a/b")), .literal("/"),
            .pointer(try JSONPointer("")),
        ])
        #expect(try KindTemplate("{url}").isSinglePlaceholder)
        #expect(try KindTemplate("{{url}}").segments == [.literal("{url}")])
        let refused: [(String, String)] = [
            ("a}b", "has a '}' that closes nothing"),
            ("a{b", "has a '{' that is never closed"),
            ("{a b}", "neither a parameter name nor a JSON Pointer"),
            (String(repeating: "{a}", count: KindTemplate.maxPlaceholders + 1), "more than \(KindTemplate.maxPlaceholders) placeholders"),
        ]
        for (text, reason) in refused {
            do {
                _ = try KindTemplate(text)
                Issue.record("\(text) was taken")
            } catch {
                #expect(error.description.contains(reason), "\(text): \(error)")
            }
        }
        #expect(try KindTemplate(String(repeating: "{a}", count: KindTemplate.maxPlaceholders)).parameterNames.count == KindTemplate.maxPlaceholders)
    }

    @Test func kindTemplatesFillParametersAndPointers() throws {
        let element = try JSONParser.parse(#"{"name": "a b", "n": 3}"#)
        let template = try KindTemplate("http://h/{id}/{/name}?n={/n}")
        #expect(try template.fill(parameters: ["id": "x/y"], element: element, encode: true) == "http://h/x%2Fy/a%20b?n=3")
        #expect(try template.fill(parameters: ["id": "x/y"], element: element, encode: false) == "http://h/x/y/a b?n=3")
        #expect(throws: KindTemplate.Invalid.self) { try template.fill(parameters: [:], element: element, encode: true) }
    }

    @Test func headerReferencesAreFoundAmongOtherBraces() throws {
        let header = try HeaderTemplate(name: "x", value: "{a {env:TOKEN}} {file} }{")
        #expect(header.references == ["{env:TOKEN}"])
        #expect(try header.expand(environment: ["TOKEN": "t"]) == "{a t} {file} }{")
        let problems: [(String, String)] = [
            ("{x {env:A", "the reference {env:… has no closing '}'"),
            ("{file:a {env:B", "the reference {file:… has no closing '}'"),
            ("{env:A B}", "'{env:A B}' does not name an environment variable (letters, digits and _)"),
            ("{file:}", "'{file:}' names no file"),
        ]
        for (value, reason) in problems {
            do {
                _ = try HeaderTemplate(name: "x", value: value)
                Issue.record("\(value) was taken")
            } catch {
                #expect(error.description == "x: \(reason)", "\(value)")
            }
        }
        #expect(try HeaderTemplate(name: "x", value: "{file:key}", folder: "/etc/k").references == ["{file:/etc/k/key}"])
    }
}
