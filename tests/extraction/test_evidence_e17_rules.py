"""General string rules from the tenth probe set's failures (session 35, e17): a label's
bracketed gloss and a value's bracketed note, label head words and ``X_name`` fields; a
role noun before a name or as its appositive; a title's full stop inside a name run; an
address's town for a town field holding its street or postcode; an identifier run on past
a comma. Texts of their own, values read off them by hand."""

from __future__ import annotations

from structgen.extraction.evidence import apply_evidence
from structgen.extraction.evidence.contacts import address_town
from structgen.extraction.evidence.roles import role_name
from structgen.extraction.evidence.strings import labelled
from tests.extraction._schemas import strict_object as _obj

STR = {"type": "string", "maxLength": 60}


def test_a_label_value_with_a_bracketed_note_after_it():
    schema = _obj(landlord=STR, tenant=STR)
    text = "LEASE\nLandlord: Brookfield Housing Trust (charity no. 1098213)\nTenant: Ola Berg"
    out, changed = apply_evidence(schema, text, {"landlord": "Ola Berg", "tenant": "Ola Berg"})
    assert out["landlord"] == "Brookfield Housing Trust" and changed == ["landlord"]


def test_a_label_with_a_bracketed_gloss_names_the_field_its_gloss_names():
    schema = _obj(tenant_name=STR, registrar=STR, borrower=STR)
    text = (
        "Vuokralainen (tenant): Aino Laine, Kauppakatu 4, Oulu\n"
        "Registrar (borrower): Mika Salo\nBorrower: Oulu City Museum"
    )
    props = schema["properties"]
    assert labelled(props, "tenant_name", text) == "Aino Laine"
    # the label itself names the registrar: its gloss does not make it the borrower's
    assert labelled(props, "registrar", text) == "Mika Salo"
    assert labelled(props, "borrower", text) == "Oulu City Museum"
    value = {"tenant_name": "Kauppakatu 4", "registrar": "Mika Salo", "borrower": "Mika Salo"}
    out, _ = apply_evidence(schema, text, value)
    assert out == {
        "tenant_name": "Aino Laine",
        "registrar": "Mika Salo",
        "borrower": "Oulu City Museum",
    }


def test_label_head_words_and_name_fields():
    schema = _obj(lender=STR, borrower=STR, student_id=STR, student_name=STR)
    text = (
        "Lending institution: Kunsthal Rotterdam\nBorrowing institution: Museum Gouda\n"
        "Student name: Eva de Wit\nStudent ID: 77-120"
    )
    props = schema["properties"]
    assert labelled(props, "lender", text) == "Kunsthal Rotterdam"
    assert labelled(props, "borrower", text) == "Museum Gouda"
    assert labelled(props, "student_name", text) == "Eva de Wit"
    assert labelled(props, "student_id", text) is None  # "Student name" names no identifier
    # a label of the name's other words names an ``X_name`` field ("Tenant:")
    assert labelled(_obj(tenant_name=STR)["properties"], "tenant_name", "Tenant: Bo Ek") == "Bo Ek"


def test_the_sibling_cut_leaves_a_labelled_value_whole():
    schema = _obj(lender=STR, object_title=STR)
    text = "Lender: Musée Rodin Paris\nObject: bronze study, inv. S.1204"
    out, _ = apply_evidence(schema, text, {"lender": "S.1204", "object_title": "Rodin Paris"})
    assert out["lender"] == "Musée Rodin Paris"


def test_a_role_noun_names_the_name_after_it_or_before_it():
    schema = _obj(photographer=STR, registrar=STR, client=STR)
    text = (
        "Agreement between Studio Nine, represented by chief photographer Tomas Lind, and "
        "the client Ebba Holm; an assistant photographer (Alva Ek) joins. Loans handled by "
        "Dr. Sara Voss, Registrar."
    )
    node = {"photographer": "Alva Ek", "registrar": "Ebba Holm", "client": "Ebba Holm"}
    assert role_name(schema, schema, "photographer", node, text) == "Tomas Lind"
    assert role_name(schema, schema, "registrar", node, text) == "Sara Voss"
    assert role_name(schema, schema, "client", node, text) is None  # its own value
    out, changed = apply_evidence(schema, text, node)
    assert out["photographer"] == "Tomas Lind" and out["registrar"] == "Sara Voss"
    assert "client" not in changed


def test_the_role_noun_rule_does_not_fire():
    schema = _obj(pest=STR, guide_id=STR, photographer=STR)
    # a capitalised noun inside a company's name; a field with an identifier word
    text = "Brightwell Pest Control visited. Our guide Jana Novak (guide 4471)."
    node = {"pest": "rats", "guide_id": "4471", "photographer": "Jana Novak"}
    assert role_name(schema, schema, "pest", node, text) is None
    assert role_name(schema, schema, "guide_id", node, text) is None
    # two names after the noun: no choice
    text = "Wedding photographer Ana Lund; backup photographer Per Dahl."
    assert role_name(schema, schema, "photographer", {"photographer": "x"}, text) is None


def test_a_title_full_stop_does_not_end_a_name_run():
    schema = _obj(conductor=STR, venue=STR)
    text = "Concert notice\nDirection: Prof. Dr. Marta Kowalska-Nowak\nVenue: Aula Leopoldina"
    out, changed = apply_evidence(
        schema, text, {"conductor": "Kowalska-Nowak", "venue": "Aula Leopoldina"}
    )
    assert out["conductor"] == "Marta Kowalska-Nowak" and changed == ["conductor"]


def test_a_town_field_holding_a_street_or_postcode_takes_the_address_town():
    schema = _obj(city=STR, home_town=STR, venue=STR)
    text = (
        "Send the keys to 41 Juniper Close, Norwich NR4 7TJ. The party is at Hall 3, "
        "Marktgasse 17, 3011 Bern; write to 75004 Paris."
    )
    node = {"city": "Juniper Close", "home_town": "75004", "venue": "Hall 3"}
    assert address_town(schema, schema, "city", node, text) == "Norwich"
    assert address_town(schema, schema, "home_town", node, text) == "Paris"
    assert address_town(schema, schema, "venue", node, text) is None  # not a town field
    node["city"] = "Marktgasse"
    assert address_town(schema, schema, "city", node, text) == "Bern"
    # a town written without a house number beside it stays
    node["city"] = "Norwich"
    assert address_town(schema, schema, "city", node, text) is None
    # a street that no address line follows gives nothing
    text = "We meet at Juniper Close 41 near the station."
    assert address_town(schema, schema, "city", {"city": "Juniper Close"}, text) is None


def test_an_identifier_run_on_past_a_comma_is_cut():
    schema = _obj(plot_number=STR, site=STR)
    # two plots labelled: no one labelled identifier, so the value's own head is read
    text = "Plot B-17, area 200 m2; plot B-18 next door. Site: Elm Row."
    out, changed = apply_evidence(schema, text, {"plot_number": "B-17, area", "site": "Elm Row"})
    assert out["plot_number"] == "B-17" and changed == ["plot_number"]
    # no digit before the comma: not an identifier's run-on
    out, changed = apply_evidence(schema, text, {"plot_number": "Elm, area", "site": "Elm Row"})
    assert out["plot_number"] == "Elm, area"


def test_a_title_before_a_labelled_name_is_no_value_of_its_own():
    schema = _obj(owner_name=STR, dog=STR)
    text = "Booking #K-12. Owner: Mrs. Ruth Ekberg. Dog: Pepper, a beagle."
    assert labelled(schema["properties"], "owner_name", text) == "Mrs. Ruth Ekberg"
    # the model's name inside the labelled one stays (the span rules' case)
    out, changed = apply_evidence(schema, text, {"owner_name": "Ruth Ekberg", "dog": "Pepper"})
    assert out["owner_name"] == "Ruth Ekberg" and not changed
