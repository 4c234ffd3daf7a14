"""Boolean, number, enum and null values decided by where the text mentions them.

A 135M model writing JSON under a grammar has two systematic failures that the text
itself can settle: it writes ``false`` for most booleans whatever the text says, and it
picks the wrong one of the text's numerals for a number field (``"guests": 12`` for
"two guests"). ``apply_evidence`` revisits such fields of a finished object with two
rules, stated on the field's name (its key split at ``_``, case changes and digits, each
word reduced to a stem; generic words such as ``has``, ``is``, ``allowed``,
``included``, ``required``, ``number`` do not count):

* **boolean**: the text *mentions* the field when all the name's words occur (as
  stems, or one stem the prefix of the other, four letters at least) within a window
  of four words. A mention in a clause (text between ``.``, ``;``, ``!``, ``?``,
  ``,``, ``(``, ``)``, ``·``, ``|`` and line breaks, except a soft wrap: a line break
  between a letter or digit and a lowercase letter, as a hard-wrapped paragraph has,
  ``unwrapped``) with a negation (``no``, ``not``, ``without``, ``never``, ``none``,
  ``non``, ``n't``, ``ex``, ``former``, ``quit``, ``declined``, ``refused``, "rather
  than", "other than", ...; not "no." before digits or an identifier, "Claim no.
  7781-0932", the abbreviation of number, nor "no" before "charge" or "cost", "included
  at no charge", a price) reads false, one without reads true; the field is true when some mention
  reads true, false when every mention reads false.
  Unmentioned: the model's value stays. A field whose first name word is ``park`` is
  also mentioned by ``garage`` and ``carport`` (``_BOOLEAN_ALIASES``: "a double
  garage" is parking).
* **number** (``integer`` / ``number``): a text word matching any of the name's words
  is a mention, and so is an alias of one (``NUMBER_ALIASES``: ``old`` and ``aged``
  for ``age``, as in "58 years old" and "a forty-six-year-old"; ``min``,
  ``hr``/``hrs``, ``sec`` for ``minutes``, ``hours``, ``seconds``; ``people``,
  ``persons``, ``adults`` for ``guests``; ``people``, ``persons`` for ``passengers``;
  ``people``, ``persons``, ``portions`` for ``servings``; ``stars`` for ``rating``;
  ``square``, ``sq``, ``sqm`` for ``m2``, as in "31 square metres" and "162 sq m";
  ``pupils``, ``children``, ``kids`` for ``students``; ``millimetres``, ``kilometres``,
  ``kilograms`` for ``mm``, ``km``, ``kg``); the
  numeral
  (``structgen.fsm.numerals.numeral_spans``) nearest to a mention, in the same clause
  and at most three words away, whose reading the field's type and bounds accept, is
  the value (a tie goes to the numeral before the mention: English writes "4 guests");
  a mention in a label of at most six words that ends in ``:`` right before the numeral
  (a currency mark between allowed, no digit in the label) is next to it ("Delivery and
  set-up: £45.00" for ``delivery_fee``; ``numbers._labelled``).
  A mention that writes more of the name's words around it (its clause, four words
  either side: its *cover*) comes first ("Monthly fee SEK 349; joining fee SEK 199":
  ``monthly_fee`` 349, not the nearer bare "fee" of 199), and one numeral goes to one
  field: the sibling whose mention ranks best (cover, then distance) takes it and the
  others their next candidates ("Gross salary NOK 48 750,00 ... Net pay NOK 34 125,00":
  ``net_pay`` takes 34 125, ``gross_pay`` 48 750; ``evidence.numbers.assign_numbers``);
  of two mentions ranked equal so far, one by a whole name word outranks one by a word
  the name's word only starts ("after matchday 14": ``matchday``'s, not
  ``postponed_matches``'). A field named for money (``labels.is_amount_field``, a
  ``balance``, or a word ending in a money word: ``surcharge``) takes no year written
  without a currency mark where the text marks amounts ("Balance brought forward from
  2025: £1,284.60"; ``numbers.unmarked_numerals``), nor a percentage ("VAT @ 20%:
  £55.30"). A mention by the name's money words alone (``price``, ``amount``, ``fee``,
  ...) covers nothing where the name has other words ("Gross amount: EUR 2.184,84" for
  ``vat_amount`` ranks after "VAT 19 %: EUR 348,84"), and in a text that marks amounts a
  money field's unmarked numeral covers one stem less ("46 pupils" for
  ``cost_per_student`` ranks after "£172 per pupil"; ``numbers.marked_numerals``).
  An alias counts for the cover of the word it stands for ("for six people in total":
  ``passengers`` covers "people" fully and takes 6 before ``total_price``'s "total").
  A numeral that is one end of a range ("between 128 and 136 systolic") is not a
  candidate: neither end is the value of a plain field; nor is a numeral of a whole date
  ("14 August 2027", ``fsm.dates.date_spans``) for a field that counts (no word of its
  name names a date part: ``days``, ``nights``, ``minimum_term_months``, not ``day`` or
  ``birth_year``; ``numbers.dated_numerals``): "hired for a single day on 14 August 2027"
  gives ``days`` no 14.
  Unmentioned, or when two sibling number fields rank one numeral equally best: the
  model's value stays; a nullable number field that no numeral decides and whose
  name's words the text mentions only in clauses with a negation ("Rate and
  experience are not stated", "no reduction") is null (**denied number**; the money rule
  does not fill it again); so is a nullable string field
  whose name the text mentions only negated ("No email given", "she left no email",
  "without email", "Email: none") and whose value the text does not write (the model's
  address was invented) or writes while the field gives its values no ``format`` or
  ``pattern`` (under copy constraints every value is a span of the text: "bought one
  laptop stand" for "she left no email") (**denied string**; a string field the schema
  does not require is left out on the same evidence); a non-nullable
  integer field, or number field named for money, that no numeral decides, whose bounds
  take 0 and whose name the text mentions only negated is 0 ("no checked baggage", "You
  didn't leave a deposit": **denied count**; the money rule does not fill it again). A non-nullable
  number field whose bounds take 0 and a mention of whose name is followed in its clause,
  at most two words on, by "waived", "nothing", "nil", "none", "free" or "zero" is 0
  (**stated zero**, ``numbers.stated_zero``: "Deposit: none required"; before the number
  rule's numerals when that mention covers every word of the name, "Monthly fee £24.99.
  Joining fee: waived (normally £30)": ``joining_fee`` 0; else only where no numeral
  decides the field; the money rule does not fill it again).
* **enum** (string options): an option is *mentioned* where its words (split at
  non-letters and underscores, as the text's words are, each reduced to a stem) occur
  as consecutive words of one clause; a mention inside a longer option's mention does
  not count ("premium economy" is not a mention of ``economy``); a currency symbol
  mentions the one ISO 4217 code option it stands for ("£489,950": ``GBP``;
  ``_CURRENCY_SYMBOLS``); where every option is an ISO 4217-shaped code (three capital
  letters) and some option's mention stands beside an amount (digits right before or
  after it, or after its symbol), only such mentions count ("Vectorline CAD Professional
  ... USD 4,475.00": ``USD``, not ``CAD``; ``options._priced``). When the model's value
  (a string option, null, or the field left out) is not mentioned, or mentioned only
  negated ("major rather than a blocker" for ``blocker``), and exactly one option is
  mentioned without a negation (one before the mention in its clause with at most two
  words between, or right after it as its predicate: "not a feature request", "remote:
  no", "remote is not possible"; "a feature request and not an emergency" and "cannot log
  in to her account", a negated verb, affirm it), that option is the value; when none is
  and the field is nullable and its name is mentioned only negated ("No dress code", as
  the boolean rule reads it), the value is null; otherwise the model's value stays.
  Options are never matched inside a word ("low" is not in "below"). An option is also
  mentioned by a compound split differently: words joined by hyphens whose letters run
  together are the option's ("Call-out" mentions ``callout``, "Wi-Fi" ``wifi``), one
  word is an option of two words run together ("callout" mentions ``call_out``;
  ``options._joined_mentions``); in an enum whose options hold ``low`` and ``high``,
  "normal" and "moderate" mention ``medium`` and "urgent" ``high`` (``SCALE_ALIASES``;
  a word that is an option itself stays that option's). Where two or more options are
  mentioned without a negation and exactly one of them stands beside a word of the
  field's name (at most one word between, in its clause, which no other of them shares:
  "4-berth outside cabin", where "Pets: none travelling" mentions ``none`` too; not "low
  or high priority"), that one counts alone (``options._beside_name``). Where no
  option is, and the text mentions the field's name only negated ("Seating only, no
  cabin"), the one option that says "none" (``none``, ``no``: ``options.NONE_OPTIONS``)
  is the value.
* **enum array**: an array whose items are string enum options holds the options the
  text mentions without a negation (as the enum rule reads mentions), in the order of
  their first mention, when that differs from the model's array and fits ``minItems`` /
  ``maxItems``: a model listing the schema's options, or closing the array at once,
  takes "GPS navigation and one child seat" as ``["gps", "child_seat"]``, and "No
  extras requested" as ``[]``.
* **separator**: a number field whose value equals a numeral only in that numeral's
  decimal-separator reading, written with trailing zeros (``48`` from "€48,000", ``1.8``
  from "1.800 EUR"), while its other reading is a whole number (``48000``, ``1800``:
  ``structgen.fsm.numerals`` reads "48,000" both ways) takes the whole reading, when
  every such numeral agrees and the field's type and bounds accept it: the model
  stopped at the separator, and no one writes 48 as "48,000".
* **span start**: a string field (not enum or const) whose value the text writes
  only inside longer chunks (every occurrence directly preceded, with no space, by
  letters, digits, ``_`` or ``-``, ``.``, ``@``, ``#``, ``+``, ``&``) starts where that
  chunk starts (its leading punctuation skipped), when every occurrence gives the same
  extension and the field's schema accepts it (formats checked): greedy copying
  commits to a start late (``"0932"`` for "SUP-0932", ``"alsayed@crescent.example"``
  for "fatima.alsayed@crescent.example"). A value that starts a chunk somewhere stays.
  Its mirror, **span end**: a value every occurrence of which the text goes on with more
  of its chunk (no space; a sentence's "." is none) ends where the chunk ends
  ("5.0.0-beta" of "5.0.0-beta.3").
* **spaced identifier**: a string field (not enum or const) holding an upper-case
  identifier head (``labels.identifier_head``: "AB-12", "KA-JM"; digits alone are none)
  whose every whole-chunk occurrence the text continues with digit groups of three or
  more, one space each (``labels.spaced_end``: "KA-JM 2281"), takes the whole
  identifier when every occurrence gives the same one and the schema accepts it.
* **time unit**: a number field named for a time unit (the last word of its name:
  ``warranty_months``, ``age_years``, ``prep_minutes``) whose value the text writes only
  as numerals followed by one other unit of the same family ("Standard cover: two years"
  for ``warranty_months`` 2; "eighteen months old" for ``age_years`` 18) takes the value
  in its own unit (24; 1.5), when that has at most two decimals and the field's type and
  bounds accept it (``numbers.unit_value``): minutes, hours, days and weeks convert among
  themselves, months and years between themselves. The number rules read a whole numeral
  followed by "and a half" as one more half ("thirty-seven and a half in total": 37.5;
  ``numbers.with_halves``).
* **duration**: a nullable number field named for a time unit that the model left null
  or out takes the one duration the text writes as "for", a numeral and a unit of the
  same family ("three times a day for 7 days" for ``duration_days``; "for two weeks":
  14), converted as the time-unit rule does (``numbers.duration_value``): where a sibling
  such as ``times_per_day`` shares the word "day", the number rule leaves both fields to
  the model.
* **repeat**: a number field that is not nullable and holds the same value as an
  earlier sibling number field (schema order, after the number rule), where the text
  writes that value as one numeral only, copied its sibling's numeral (a 135M model
  writes ``"systolic": 142, "diastolic": 142`` for "BP 142/91"): it takes the numeral
  the text writes next, in the same clause with at most two words between ("118 over
  76"), when a reading of it fits the field's type and bounds and no sibling holds it.
  A value the text writes twice, or whose next numeral does not fit, stays.
* **string repeat**: a string field with a ``pattern`` (an airport code, say) that
  holds the same value as an earlier sibling string field (``"from_airport": "FRA",
  "to_airport": "FRA"`` for "FRA → New York JFK"), where the text writes that value
  once as one word, takes the first word the text writes after it, in the same clause
  with at most two words between, that its schema accepts and no sibling holds. This
  rule also runs on each object item of an array (the other rules do not: a mention
  does not say which item it belongs to).
* **range**: two sibling number fields named ``X_min`` and ``X_max`` (or ``minimum`` /
  ``maximum``, ``low`` / ``high``, at either end of the name) take the two ends of the
  one range the text writes (two numerals joined only by ``to``, ``-``, ``–``, ``—`` or
  ``between ... and``, currency marks and line breaks around the joiner allowed, the
  first below the second),
  looking only in clauses that mention ``X`` when the text mentions it ("Salary €42,000 to
  €48,000": the model wrote ``"salary_min": 3``, the experience; "between minus six and
  minus one": ``low_c`` -6, ``high_c`` -1); a pair named by its ends alone in a nested
  object takes the object's name as ``X`` (``estimate.low`` / ``estimate.high``:
  "Estimate €8,000 - 12,000", not the artist's "1921-1998"); with no such range or two,
  the model's values stay.
* **name run**: a free string field (no ``enum``, ``const``, ``format`` or ``pattern``)
  whose value starts with a capitalised word and that the text writes with capitalised
  words right next to it (one space between; not a sentence's or label's first word,
  not a capitalised function word such as "The" or "Her" or a day or month name, not
  after a value ending in ``.``) takes those words, up to three on each side, when every
  occurrence of the value gives the same run and no sibling's value is added
  ("Sakuragaoka" -> "Hotel Sakuragaoka", "Northwind" -> "Northwind Logistics": greedy
  copying stops or starts inside a name); a sentence's first word is taken where the name
  heads its sentence (the text's start or a sentence end before it, not a label's ":";
  after the name " - ", the sentence's end, or a comma and one to four words ending it;
  no opener such as "Dear": "Riverside Dental Care - TREATMENT ESTIMATE", "SERVICE
  RECORD. Autohaus Kessler, Karlsruhe."; not "Tom Berg, 51, a baker"; the full stop of
  a title or an initial ends no sentence: "Prof. Dr. Ursula Keller-Brandt"); two names
  joined by `` & `` are one run ("Finch Auctioneers" -> "Harlow & Finch Auctioneers", a
  sentence's first word too).
* **place list**: a free string field named for a place (a word of its name ``location``,
  ``venue``, ``address`` or ``place``) whose value the text writes as one part of a
  comma-joined list of names ending the sentence or clause ("at Bright Smile Dental, Elm
  Street.", "Clinic: Paws & Claws, Brno."; each part one to four capitalised words, ``&``
  or numbers; a part starting the sentence is not taken) takes the whole list, when every
  occurrence gives the same list and no part holds a sibling's value ("Greenleaf
  Pharmacy, Dublin" stays "Dublin" where the company is "Greenleaf Pharmacy").
* **sibling cut**: a free string field whose value holds another string field's value
  (not an ``enum`` or ``const`` option) after its first word, at word boundaries, ran on
  past its end ("Sofia. elena.petrova@quantix.example", "... reception at Hotel Sakuragaoka
  on 2026-05-09, 17:30"): it is cut before the first such value, at the last clause break
  (``. ``, ``, ``, ``; ``, `` - ``) before it when there is one ("Dmitri Volkov, booking
  code LM55RT" -> "Dmitri Volkov"), trailing punctuation and function words dropped
  ("... reception at" -> "... reception"; a currency sign too: "ElektroMarkt Graz for €
  349,90" with a ``price`` of 349.9), when the text writes the rest and the schema
  accepts it. Runs after the name-run rule, so a sibling extended to "Hotel Sakuragaoka"
  cuts at its start. A numeral written as its own word (a space before it) whose reading
  a sibling number field holds cuts the same way ("Quick garlic prawns for two", with
  ``servings`` 2).
* **sentence cut**: a free string field whose value the text writes across a sentence end
  (a word of three or more lowercase letters, its full stop, a capital: "Sparse retrieval
  at scale. Journal of Information Systems") is cut before it, when the schema accepts
  the cut ("Dr. Sato", "K.K. bills", "St. Louis" are no sentence end); a value ending
  with such a word and its full stop, where the text's sentence ends after it at every
  occurrence, loses the stop ("... with an empty table." -> "... with an empty table").
* **date tail**: a free string value that runs on into a date it ends with (a bracketed
  note after it allowed), after ``on``, ``at``, ``by``, ``from``, ``until``, ``since``,
  ``born``, ``dated`` or a comma (``born`` or ``dated`` after it allowed) ("Toronto on
  Feb 21st", "Village Hall, 12 January 2026", "Ingrid Søndergaard, born 14/03/1951
  (day/month/year)"), is cut before that word (``names.date_tail``).
* **dangling end**: a free string value ending with an opening bracket and at most two
  words ("Dev Anand Krishnan (booking"), with ``:``, ``,`` or ``;`` and then "The",
  an article, "and", "or", "of" or "with" ("HIST 214: The"), or with a currency sign
  and no amount, a preposition before it allowed ("ElektroMarkt Graz for €"), or with a
  clause break and the next phrase's label, one to three words and a colon ("27/01844/H.
  Your reference:"), is cut before it (``names.dangling_cut``).
* **label word**: a free string value whose first word is a word of the field's name
  followed by a name ("Patient Øyvind Hansen" for ``patient_name``, "passenger Aisha"
  for ``passenger``) is the name, before the name-run rule reads it
  (``names.label_word_cut``).
* **possessive**: a free string value that is a name of two to four capitalised words
  run on past its "'s" into lowercase words or digits ("Greg Hollis's 7-year-old
  Labrador") is the name; "St Aidan's Academy" stays, and so does a title field's value
  ("Grandma Halina's potato soup", ``names.possessive_cut``).
* **honorific**: a free string field whose value ends with "Mr.", "Mrs.", "Ms.", "Miss"
  or "Mx" and a name of capitalised words takes the name ("E-ticket for Mr. Dmitri
  Volkov" -> "Dmitri Volkov"); "Dr." stays ("Dr. Sato" is how a provider is named).
* **label**: a free string field the model left null or out, or holding a string that
  neither holds the labelled value nor lies inside it (a heading, another label, a
  sibling's value: "LØNNSSLIPP / PAYSLIP" for "Employee: Søren Haugen"), takes the value
  the text writes after the one label naming it ("Title: Data Engineer |" for ``job_title``:
  ``Label: value`` at the text's or a sentence's start or after ``|``, ``;``, ``·`` or a
  line break, the value ending before one of them, ``,`` or a sentence end), when the
  label's words are words of the field's name ending with its last word, no other field
  of the object is named by that label (of several, the one whose every name word the
  label writes: "Employee" names ``employee``, not ``employee_id``), and, for a field
  left null, no sibling holds the value; a value that
  starts with a negation or is "n/a" ("Email: none") is no value (the denied string
  rule reads it). A label may carry a bracketed gloss before its colon, read where the
  label itself names no field ("Lejer (tenant): Anders Thygesen" for ``tenant_name``;
  "Registrar (borrower):" stays the registrar's), and a value a bracketed note after it
  ("Landlord: Haveforeningen Solsikken (CVR 29417703)"); a label's last word ``name``,
  ``institution`` or ``organisation`` after another is dropped ("Lending institution" for
  ``lender``; never for an identifier field: "Student name" is not ``student_id``'s), and
  an ``X_name`` field is named by "X" too (``strings.labelled``). The sibling-cut rule
  leaves such a labelled value whole; a title's full stop ends no labelled value ("Owner:
  Mr. Henrik Lund").
* **role noun**: a free string field named by one role noun (``photographer``,
  ``registrar``, ``conductor_name``) takes the one name of two or three capitalised words
  the text writes right after that noun in lowercase ("lead photographer Daniel Okafor";
  not "(Ana Ruiz)" in brackets, not "Brightwell Pest Solutions") or as its appositive
  ending a clause ("Dr. Friederike Haas, Registrar)"), where the model left it null or
  out or holds an unrelated string (``roles.role_name``).
* **address town**: a free string field named for a town (``city``, ``town``) whose value
  the text writes as an address's street (a house number beside it) or postcode takes the
  town that address writes with a postcode ("9 Birchcliffe Terrace, Halifax HX7 8DB":
  "Halifax"; "84000 Avignon"), when every occurrence gives the same
  (``contacts.address_town``).
* **appositive**: a free string field named for a person's role (the last word of its
  name ``title``, ``role``, ``position``, ``occupation`` or ``designation``) that the
  model left null or out takes the phrase the text writes right after a sibling name
  field's value (a key with the word ``name``), after ", " and before " at " or ", "
  ("Dr. Elena Petrova, Head of Research at Quantix Labs": "Head of Research"; "Fatima
  Al-Sayed, Office Manager, Crescent Dental Clinic"), when its words are capitalised
  (function words and ``&`` inside), every occurrence of the name gives the same phrase,
  and the phrase neither is nor holds a sibling's value ("Ana Ruiz, Verde Foods, Madrid"
  with ``company`` "Verde Foods" gives nothing).
* **amount**: a number field named for money (``labels.is_amount_field``: ``price``,
  ``total``, ``amount``, ``cost``, ``fee``, ``paid``, ...) whose value is none of the
  readings of the numerals the text writes with a currency mark (``labels.amount_spans``:
  "£489,950", "CHF 1'150'000"), where exactly one such numeral fits the field's type and
  bounds, takes that numeral (the model copied the area, 162, as the price); a nullable
  one does so from null too (the model wrote null for "bought ... for €49").
* **total**: a number field named for a total of money (``total``, or ``total`` and a
  money word: ``total_cost``, ``total_income``; not ``total_litres``) takes the largest
  reading of the currency-marked numerals the text writes that fits it, a total summing
  the other amounts ("Subtotal £276.50, VAT @ 20%: £55.30, Total: £331.80";
  ``numbers.total_value``), before the amount rule.
* **identifier**: a string field named for an identifier (``labels.identifier_field``:
  ``invoice_number``, ``booking_reference``, ``ticket_id``) takes the one identifier the
  text writes right after the field's label (``labels.identifier_candidates``: "invoice
  BL-778", "booking code LM55RT") when the model's value differs and the field's schema
  accepts it; with none or two different ones, a value ending in ``.`` loses it (no
  identifier ends with a full stop: "RR 482 913 057 PL."), and one holding a digit that
  runs on past ", " into lowercase words is cut there ("H-42, areal"), else the model's
  value stays.
* **identifier shape**: a free string field named for an identifier whose value holds
  no digit (a name, a heading: "Folktandvården Plus" for ``patient_id``; two characters
  at least, never written inside a longer chunk: a fragment's ends are the span rules')
  and that the identifier rule left alone takes the one identifier the text writes
  (``labels.identifier_chunks``: a chunk starting with a letter or ``#`` that holds a
  digit, "P-2207-14", with its spaced digit groups; none in an e-mail address, a URL or an
  amount) that no sibling's value holds (``strings.identifier_shape``); with none or two,
  the value stays.
* **host name**: a free string field named for a host name (``labels.host_field``:
  ``domain``, ``website``, ``hostname``, ``homepage``) whose value is none of the host
  names the text writes (``labels.host_names``: "zielinski-foto.pl") takes the one such
  name no sibling holds (``strings.host_value``; a registrant's name copied as the domain).
* **IBAN**: a string field named for an IBAN (``labels.iban_field``: ``iban``) takes the
  one IBAN the text writes (``labels.iban_runs``: country letters, check digits, groups of
  four; its ISO 13616 check holds), as written, when the model's value differs ("GB29"
  for "IBAN GB29 NWBK 6016 1331 9268 19"; an account holder's name); with none or two
  different ones, the model's value stays; the sibling cut leaves such an IBAN whole.
* **phone**: a string field named for a phone number (``labels.phone_field``) takes the
  one phone number the text writes (``labels.phone_runs``) when the model's value is
  none of them ("1234 or wei.zhang@lantern." for "0755 8888 1234"); with two or more,
  the model's value stays.
* **identifier null**: a nullable number field whose value the text writes only inside
  chunks a sibling string field holds (17 in "#88-17", the ``ticket_id``) is null: that
  numeral is part of another field's identifier.
* **foreign numeral**: a number field whose value the text writes only inside a phone
  number, an e-mail address, an identifier or a date (``labels.foreign_spans``: the 555
  and 134 of "555 0134", the 1 of "+1 555 0134", the 17 of "#88-17", the 1 and 2019 of
  "June 1, 2019"), or that the text does not write while it writes no numeral at all
  ("age unknown"), is not the field's: a nullable one is null, another takes the one
  numeral written outside such spans that fits its type and bounds and no sibling holds
  ("John Park, 41, ... +1 555 0134": 41), else keeps its value. A field named for a date
  part (``day``, ``month``, ``year``, ``hour``, ``time``, ...) is left alone, and a field
  named for an identifier (``order_number``) reads identifiers as its own ("Order #4471").
  A value not written while the text writes other numerals stays (it may be derived).
* **phone fragment**: a phone field (``labels.phone_field``; no ``enum``, ``const``,
  ``format`` or ``pattern``) whose value holds fewer than seven digits while the text
  writes no phone number (``labels.phone_runs``) is null, or left out when the schema
  does not require it: the "1" of "June 1" is no phone number.
* **e-mail shape**: a string field named for an e-mail address (``labels.email_field``;
  no ``enum``, ``const``, ``format`` or ``pattern``) whose value has no ``@`` ("email":
  "Carlos Diaz", a sibling's name) takes the one address the text writes that no sibling
  holds (``labels.email_addresses``); when the text writes no address it is null, or
  left out when the schema does not require it; with two or more, the value stays.
* **invented e-mail**: a field named for an e-mail address or of ``format: email``
  holding an address the text does not write (case ignored; the grammar's fallback when
  the text has no address to copy) takes the one address the text writes that no
  sibling holds; when the text writes no address, nor the value's local part as a word
  (an address spelt out), it is null, or left out when the schema does not require it.
* **URI shape**: a ``format: uri`` (or ``iri``) field whose value is no URL the text
  writes (``"keynote:"``: a scheme the grammar let through) takes the one URL the text
  writes that no sibling holds (``strings.urls``); when the text writes no URL it is
  null, or left out when the schema does not require it.
* **left-out number**: a number field the model left out takes the numeral written right
  after a mention of its name ("wind 20 km/h" for ``wind_kmh``; not "for 7 days").
* **named date**: a date field (``format: date``) or time field (``format: time``, or a
  ``pattern`` that ``09:30`` fits) left null or out (where the schema lets it) takes the
  one date or time written within two words after a run of words naming it, every word
  of the name but ``date``/``time``/``day`` ("Next meeting: 9 February 2026", "next
  service due 11.03.2027", "Doors open at 7 pm"; ``dates.named_date``); an ambiguous
  numeric date, two values or a negated name leave it. One the model filled with a
  sibling's date or time takes the named one the same way ("Next meeting: 10 November
  2026" for ``next_meeting`` holding the meeting's own ``date``, "Date of discharge:
  11/19/2026" for ``discharge_date`` holding ``date_of_birth``; ``dates.renamed_date``);
  a value no sibling holds stays.
* **pattern shape**: a string field with a ``pattern`` (no ``format``; not a time) whose
  value holds a digit the text does not write (an invented DOI) takes the one chunk the
  text writes that the pattern accepts and no sibling holds; with none it is null, or
  left out when the schema does not require it; one left null takes the one such chunk
  written right after a word of its name ("doi:10.1016/j.is.2021.04.007";
  ``strings.pattern_shape``).
* **label list**: an array of free strings takes the one list the text writes after a
  label whose last word names it and no sibling ("Attending: A, B and C", "Absent with
  apologies: D"), or whose first word does, the rest one to three lowercase words
  ("Vaccines given so far: E and F", "Languages spoken: G"), split at commas, "and" and
  "&" (``strings.label_list``).
* **roles**: two free string fields whose names differ by a role word (``home_team`` /
  ``away_team``) exchange values when the text labels them the other way round ("Home:
  Tampere Lynx", "Cardiff Wildcats (home)", "HireHub Tools Ltd (the company)", the role
  word alone in its brackets, after an article or not) and marks neither with its own role
  (``roles.swapped_roles``).
* **denied object**: a nullable object field whose name the text mentions only negated
  ("General admission standing ticket, no seat") is null.
* **denied array**: an array field holding items whose name the text mentions, every
  mention negated as a word (a negation just before it, "No apologies.", or as its
  predicate, "Apologies: none"; a negation elsewhere in the clause is not enough), is
  empty where the schema accepts an empty array (``nulls.denied_items``).
* **contact**: a nullable object field the model left null or out whose two required
  properties are a free string field named for a name (a key with the word ``name``) and a
  phone field takes the name and phone number the text writes together ("Call Hannah
  Wright, 0113 496 0000, to arrange a viewing", "Agent: Lukas Frei, 061 555 12 34",
  "agent Rui Costa on +351 ...": two or three capitalised name words, a comma, "on",
  "at" or "reachable at" between; a sentence's first word is not taken), when the text
  writes exactly one phone number that no sibling holds and does not mention the field's
  name only negated ("Private sale, no agent"; ``evidence.contacts``).
* **date order**: when two ``format: date`` fields of one object hold the same date
  and the text writes exactly as many dates (every reading ``structgen.fsm.dates``
  gives) as the object has date fields, the date fields take them in text order (an
  event's ``date`` and ``rsvp_by``, a booking's ``check_in`` and ``check_out``); the
  same over the date fields of an object and the objects nested in it (not in arrays),
  in schema order, when some of them are nested (a rental's ``pickup.date`` and
  ``return_date``).
  Two readings of one ambiguous numeric date ("09/03/2027") are one date written, not
  two (no change).
* **relative date**: two ``format: date`` fields of one object holding the same date
  that the text writes once, where every date the text writes is held by a date field of
  the object: one copied the other (the nullable one where exactly one is nullable, else
  the later in schema order). With exactly one relative date in the text ("yesterday",
  "tomorrow", "one week later", "two weeks after today's screening", "twelve months from
  the date of this visit", "three days earlier", "a month ago"; not "14 days before
  travel", a deadline; ``dates.relative_offsets``) it takes the held date moved by it (a
  month or year keeps the day, clamped to the month's end); with none, a nullable copy
  beside a non-nullable field is null ("Next routine service as per contract": no
  ``next_visit``; ``dates.relative_date``). Runs after the date order rule.
* **date range**: when two ``format: date`` fields next to each other in one object hold
  the same date and the text writes exactly one range with that date among its ends'
  readings (two whole dates joined by "-", "–", "to", "until", "till", "through":
  "Period: 01.09.2026 - 30.09.2026"; or a day number joined to a whole date, the range
  inside one month: "from 14 to 16 June 2027"), the first field takes the range's start
  and the second its end (``dates.date_range``; the readings that keep the start before
  the end; runs before the date order rule, which would take "14 to 16 June 2027,
  booked 2 May 2027" as two dates in order).
* **time order**: when two or more time fields of one object (``format: time``, or a
  ``pattern`` that ``09:30`` fits) hold the same time and the text writes exactly as many
  distinct times as the object has time fields ("access from 5:30pm, everyone out by
  10:45pm", "kl. 18:00-23:30"), the time fields take them in text order (schema order;
  ``strings.times_in_order``), as the date order rule does for dates.
* **stated order**: a ``format: date`` field holding one reading of an ambiguous numeric
  date (``03/02/2026``) the text writes with its order stated right after it ("(DD/MM/YYYY)",
  "dd.mm.yyyy", "[MM/DD/YY]"), or later in its sentence in letters or words ("04/05/2027
  to 07/05/2027 (dates written day/month/year)", "(D/M/Y)", "(month first)"), takes the
  stated reading (``dates.stated_order``); runs after the date order rule.
* **date null**: a nullable string field without ``format`` or ``pattern``, its name
  nowhere in the text, whose value reads as a date or time (``fsm.dates``) that a
  sibling field holds is null (an appointment's ``location`` = "11 a.m.", the ``time``).
* **placeholder**: a string field (no ``enum`` or ``const``) holding a word that stands
  for no value ("unknown", "n/a", "none", "TBC", "not stated": ``nulls.PLACEHOLDERS``;
  "Breed unknown, so we leave it blank") is null, or left out where the schema does not
  require it; a field the schema requires and does not let be null keeps it.
* **null**: a nullable string or number field whose value equals a sibling field's
  value (after the rules above), and whose name the text never mentions (no text word
  matches a stem of it), is null: the model copied a value the text gives to another
  field into one the text does not give (``"rsvp_by"`` = the event's date).

* **array items**: items the text does not support are dropped (``items.trim_items``:
  from the first repeat of an earlier item on, and items whose parts the text writes
  apart), run after the rules above.
* **counted goods**: a top-level array whose items hold a count (an integer field named
  ``quantity``, ``qty`` or ``count``), one free string and at most one price (a number
  field named ``price``, ``value``, ``cost`` or ``amount``) is read from the text's item
  phrases, each item's parts from one phrase ("12 x SKU-4471 tea bowl @ USD 18.40":
  12, "SKU-4471 tea bowl", 18.40; goods a list entry names before their count are those
  words, "You ordered: rapeseed oil, five bottles à 79 kr", and a unit right after the
  count is no part of them, "2 kg smoked ham"), replacing the model's items
  (``counted.counted_items``),
  run last; an array of measurements (one free string, one number, an enum flag,
  optionally a string ``unit``) likewise from the text's measurement clauses ("sodium
  139 mmol/L, normal"), where each clause names one option or implies one ("below
  range", a value outside "[ref 0.4-4.0]": ``counted.measured_items``, ``implied_flags``);
  an array of two free strings from the text's one run of three or more keyed values
  ("Mathematics: A; English: B+; Physics: A*", ``counted.pair_items``); an array of one
  free string from the text's one run of two or more quoted spans that holds the model's
  strings ("'Dune'; 'Emma'", ``counted.quoted_items``); an array of measured goods (a
  free string, a number and a ``unit`` field, a free string or an enum) from the text's
  one longest list of two or more goods, each a quantity, a unit or none, and a name,
  that holds a model item ("800 g tomatoes, 1 onion, 2 tbsp olive oil", "half a
  teaspoon of baking powder": ``counted.unit_items``); an array of weekly sessions (a
  weekday enum, two times, at most a nullable place) one record per day of each run of
  weekday names, with the first time range and place of its region ("Mondays and
  Wednesdays, 10:15-11:45, in room K-204": ``records.weekly_items``); an array of
  identified records (a ``pattern`` identifier, a free string, a number, at most a
  boolean) one record per identifier written, from its region up to the next one
  ("MSKU4417203, frozen cod fillets, 21,450 kg gross; ...": ``records.identified_items``);
  an array of travel legs (from and to fields by name, a date, optionally a mode enum,
  a carrier, a time, a nullable string) one record per sentence with one "from X to Y"
  leg ("Leg two: FlixBus N702 overnight coach from Paris to Barcelona the same day":
  ``records.leg_items``); an array of day numbers (a weekday enum and a number) from the
  text's one longest run of clauses each naming one weekday, a numeral right after it
  ("Mon 8.5 h, Tue 7.5 h"; "Monday seven hours, Tuesday eight, Wednesday I was off
  sick": ``records.day_number_items``); an array of table rows (one free string or date
  and two or more numbers) from the text's one longest run of two or more lines each
  writing the label and then exactly those numerals, units and currency marks between
  ("2  Marske Athletic  14  9  2  3  29", "03/03/2027 - 52.4 l - £79.12":
  ``rows.row_items``), or, keyed by a date, from the one sentence writing two or more
  dates each followed by exactly those numerals ("on 6 April 2027, 41.2 litres for
  758,08 kr, and on 22 April 2027, ...": ``rows.dated_entries``); an array of labelled
  amounts (one free string, one money number) from the one list after a "Label:" that
  names it, or, where the object's arrays of that shape are as many as the unnamed
  lists, in order ("Payments: hall hire £960.00; insurance £118.40":
  ``rows.amount_items``); an array of cell rows (free strings, pattern strings and
  numbers, at least one string and one number) from the text's one longest run of two or
  more lines cut into cells at column gaps, bars, spaced dashes and dot leaders, each
  cell one field's value, a number cell one numeral with at most two unit words, a total
  line and bracketed asides no record ("CN-5510  12 pallets  8 640 kg  NOK 14 200,00",
  "Coach hire ........ £1,150.00", "10 km    0:49:30": ``rows.cell_items``); where no
  rule reads the records, the model's items of one free string and number fields named
  for a unit (``dose_mg``, ``weight_kg``) take the numeral the text writes with that unit
  right after the item's string ("metformin 500 mg": ``records.unit_numbers``).

A replacement is kept only when the object stays valid under the schema (``jsonschema``).
The rules read the text only (no model call); ``extract(evidence=...)`` turns them on,
and ``EVIDENCE_DEFAULT`` is the measured default (``benchmarks/RESULTS.md``).

Layout (``structgen/extraction/evidence/``): ``text.py`` reads the text and the names
(``stem``, ``unwrapped``, ``name_stems``, ``option_stems``, words, clauses, negations),
``fields.py`` a field's subschema (kind, nullable, bounds), ``options.py`` holds the
boolean, enum and enum array rules (currency symbols included), ``numbers.py`` the
number, total, separator, time-unit (and "and a half"), duration, repeat, range, amount,
denied-number, denied-count and foreign numeral rules, ``strings.py`` the span-start,
span-end, spaced identifier, label, string repeat, identifier, identifier shape, host
name, phone, phone fragment,
e-mail shape, invented e-mail, URI shape, pattern shape, label list and time order rules,
``roles.py`` the role and role-noun rules, ``names.py`` the name-run, place-list, sibling-cut,
sentence-cut, date-tail, dangling-end, label-word, possessive, honorific and appositive
rules (where a copied name starts and ends), ``records.py`` the weekly-session,
identified-record, travel-leg, day-number and unit-number rules, ``rows.py`` the table-row,
labelled-amount and cell-row rules, ``dates.py`` the date order, date
null, named date (and its renamed-date twin) and stated-order rules, ``contacts.py`` the
contact and address-town rules, ``nulls.py`` the null, identifier null, placeholder and denied-array
rules, ``counted.py`` the arrays of counted goods, measurements, keyed values, quoted
titles and measured goods, and ``apply.py`` the driver, ``apply_evidence``, which this
package re-exports.
"""

from __future__ import annotations

from structgen.extraction.evidence.apply import apply_evidence
from structgen.extraction.evidence.text import name_stems, option_stems, stem, unwrapped

__all__ = [
    "EVIDENCE_DEFAULT",
    "apply_evidence",
    "name_stems",
    "option_stems",
    "stem",
    "unwrapped",
]

EVIDENCE_DEFAULT = True
