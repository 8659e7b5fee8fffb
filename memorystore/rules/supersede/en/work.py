"""English rules for where and as what the user works: "I work at X", "I joined X as Y", "I
left X", "I'm a Y", "I got promoted to Y".

Why careful: an employer must be a name ("I work at home", "I work at night" are none), and a
title must end in a known job head (`lexicons/job_heads.en.txt`: "I work as a team" is no
title); a change ("I started a new job at X") retires the old employer even when it is
contained in the new one.
"""

from __future__ import annotations

import re

from memorystore.rules import lexicon
from memorystore.rules.supersede.en.grammar import (
    ADV,
    END,
    JOB_TITLE_EN,
    JOB_TITLE_EN_RE,
    NOT_NAMES,
    NOW,
    STRICT_END,
    V,
)
from memorystore.rules.supersede.frame import Frame
from memorystore.rules.supersede.reading import en_value, title_frame
from memorystore.rules.supersede.rule import Clause, rule
from memorystore.rules.supersede.values import EN_PLACES

__all__ = [
    "CHANGED_JOBS",
    "HIRED_AT",
    "IS_A",
    "JOINED_AS",
    "LEFT",
    "LEFT_FOR",
    "MY_EMPLOYER_IS",
    "MY_TITLE_IS",
    "NEW_JOB_AT",
    "PROMOTED_TO",
    "WORKS_AS",
    "WORKS_AT",
]

_UNNAMED_DENY = lexicon.words("living while bit few moment change reason time week day")
_GROUP_WORDS = re.compile(
    r"\b(?:club|gym|team|group|community|league|band|choir|class|course|program|programme|"
    r"society|association|discord|slack|server|channel|forum|meetup|waitlist|newsletter)\b"
)
_A_AN = re.compile(r"(?:a|an)\s")
_FOR_TO = re.compile(r"\b(?:for|to join|to)\b")


def _employer_frames(m: re.Match[str], c: Clause, single_ok: bool, *, change: bool) -> list[Frame]:
    if c.all_lower:
        return []  # without capitals a company can't be told from "work at night"
    out: list[Frame] = []
    if _A_AN.match(m.group("v")) and not change:
        # "works at a fintech startup": an unnamed employer, kept as "a ..." so that a named
        # one can retire it but it never retires one
        v = en_value(c, m, "v", cap=False, words=5, indefinite=True)
        v = f"a {v}" if v and v not in _UNNAMED_DENY else None
    else:
        v = en_value(c, m, "v", cap=True)
    if v is None or v in NOT_NAMES or v in EN_PLACES or _GROUP_WORDS.search(v):
        return []
    if not single_ok:
        return []
    out.append(Frame("employer", v, previous="" if change or c.chg else None))
    t = en_value(c, m, "t", cap=False) if "t" in m.groupdict() else None
    if t is not None and JOB_TITLE_EN_RE.fullmatch(t):
        out.append(title_frame(t, None))
    return out


def _employer(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    return _employer_frames(m, c, single_ok, change=False)


def _employer_change(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    return _employer_frames(m, c, single_ok, change=True)


def _employer_left_for(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    v = en_value(c, m, "v", cap=True)
    p = en_value(c, m, "p", cap=True)
    if not v or not p or not single_ok or p == v:
        return []
    if {v, p} & (EN_PLACES | NOT_NAMES) or _GROUP_WORDS.search(f"{v} {p}"):
        return []
    return [Frame("employer", v, previous=p)]


def _cancel_employer(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    if c.all_lower:
        return []  # without capitals a company can't be told from "work at night"
    v = en_value(c, m, "v", cap=True)
    if v is None or v in NOT_NAMES or v in EN_PLACES or _GROUP_WORDS.search(v):
        return []
    if _FOR_TO.search(v):
        return []  # "left Google for Meta": the switch rule's
    return [Frame("employer", "", cancel=True, previous=v)]


def _title_frames(m: re.Match[str], c: Clause, single_ok: bool, *, change: bool) -> list[Frame]:
    if not single_ok:
        return []
    t = en_value(c, m, "t", cap=False, words=5)
    if t is None or not JOB_TITLE_EN_RE.fullmatch(t):
        return []  # "work as a team", "promoted to the next level"
    out = [title_frame(t, "" if change else None)]
    if "v" in m.groupdict() and m.group("v") and not c.all_lower:
        v = en_value(c, m, "v", cap=True)
        if v is not None and v not in NOT_NAMES and v not in EN_PLACES:
            out.append(Frame("school" if out[0].slot == "education" else "employer", v))
    return out


def _title(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    return _title_frames(m, c, single_ok, change=False)


def _title_change(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    return _title_frames(m, c, single_ok, change=True)


WORKS_AT = rule(
    "en.employer.works_at",
    "employer",
    "subj",
    "work|employed",
    rf"^{ADV}(?:work|works|am working|is working|have been working|has been working|"
    rf"am employed|is employed)\s+(?:as\s+(?:a |an |the )?(?P<t>{V})\s+)?"
    rf"(?:in\s+(?:sales|marketing|finance|hr|it|engineering|research|design|product|"
    rf"operations|support|legal|accounting|management|data science|the \w+ team)\s+)?"
    rf"(?:at|for|by)\s+(?P<v>{V}){END}",
    _employer,
    positives=[
        ("I work at Google", Frame("employer", "google")),
        ("The user works at a fintech startup.", Frame("employer", "a fintech startup")),
        (
            "I work as a designer at Figma.",
            (Frame("employer", "figma"), Frame("job_title", "designer")),
        ),
    ],
    negatives=[
        "I work at home.",
        "I work at night.",
        "i work at google",
        "My brother works at Microsoft.",
    ],
)

NEW_JOB_AT = rule(
    "en.employer.new_job_at",
    "employer",
    "subj",
    "job|position|role|work|hired|offer",
    rf"^{ADV}(?:have |has )?{NOW}(?:started|began|got|landed|accepted|took|taken|"
    rf"gotten|start|starting)\s+(?:a |an |my |the )?(?:new |first )?"
    rf"(?:full-time |part-time |permanent )?(?:job|position|role|work|working|gig)\s+"
    rf"(?:as\s+(?:a |an |the )?(?P<t>{V})\s+)?(?:at|with)\s+(?P<v>{V}){END}",
    _employer_change,
    positives=[
        ("I started a new job at Microsoft", Frame("employer", "microsoft", previous="")),
        (
            "I got a job as a nurse at St Mary's.",
            (Frame("employer", "st mary's", previous=""), Frame("job_title", "nurse")),
        ),
    ],
    negatives=["I started a new job at a startup.", "My wife started a new job at Apple."],
)

HIRED_AT = rule(
    "en.employer.hired_at",
    "employer",
    "subj",
    "hired",
    rf"^{ADV}(?:was |were |got |have been |has been )?{NOW}hired\s+"
    rf"(?:as\s+(?:a |an |the )?(?P<t>{V})\s+)?(?:at|by)\s+(?P<v>{V}){END}",
    _employer_change,
    positives=[
        ("I was hired at Stripe last month.", Frame("employer", "stripe", previous="")),
        ("I got hired by Shopify as a developer.", Frame("employer", "shopify", previous="")),
    ],
    negatives=["I was hired at the club.", "I got hired by someone."],
)

JOINED_AS = rule(
    "en.employer.joined_as",
    "employer",
    "subj",
    "joined",
    rf"^{ADV}(?:have |has )?{NOW}joined\s+(?P<v>{V})\s+as\s+(?:a |an |the )?"
    rf"(?P<t>{V}){END}",
    _employer_change,
    positives=[
        (
            "I joined Meta as a product manager.",
            (Frame("employer", "meta", previous=""), Frame("job_title", "product manager")),
        ),
        (
            "The user joined Canva as a designer.",
            (Frame("employer", "canva", previous=""), Frame("job_title", "designer")),
        ),
    ],
    negatives=["I joined a book club.", "I joined the Chess Club as a member."],
)

CHANGED_JOBS = rule(
    "en.employer.changed_jobs",
    "employer",
    "subj",
    "switched|changed|moved",
    rf"^{ADV}(?:have |has )?{NOW}(?:switched|changed|moved) (?:jobs|companies|employers)"
    rf"\s+(?:and (?:am|is) now at |to )(?P<v>{V}){END}",
    _employer_change,
    positives=[
        ("I changed jobs to Stripe.", Frame("employer", "stripe", previous="")),
        ("I switched companies to Atlassian.", Frame("employer", "atlassian", previous="")),
    ],
    negatives=["I changed jobs to a startup.", "I switched jobs recently."],
)

MY_EMPLOYER_IS = rule(
    "en.employer.my_employer_is",
    "employer",
    "poss",
    "employer|company|job",
    rf"^(?:new |current )?(?:employer|company|job|workplace)\s+is\s+(?:now\s+)?"
    rf"(?:at\s+)?(?P<v>{V}){END}",
    _employer,
    positives=[
        ("My employer is now Stripe.", Frame("employer", "stripe")),
        ("My new company is Shopify.", Frame("employer", "shopify")),
    ],
    negatives=["My company is growing.", "My job is at home."],
)

LEFT = rule(
    "en.employer.left",
    "employer",
    "subj",
    "quit|left|resign|laid off|fired|work|leaving",
    rf"^{ADV}(?:have |has )?(?:just |recently )?(?:quit|left|resigned from|"
    rf"was laid off (?:from|by)|got laid off (?:from|by)|have been laid off (?:from|by)|"
    rf"was fired (?:from|by)|got fired (?:from|by)|no longer work (?:at|for)|"
    rf"no longer works (?:at|for)|do not work (?:at|for)|does not work (?:at|for)|"
    rf"stopped working (?:at|for)|used to work (?:at|for)|am no longer (?:at|with|"
    rf"working (?:at|for))|is no longer (?:at|with|working (?:at|for))|am not working "
    rf"(?:at|for))\s+(?:my (?:job|position|role) at\s+)?(?P<v>{V})"
    rf"(?:\s+(?:last|this) \w+|\s+\w+ (?:days?|weeks?|months?|years?) ago)?"
    rf"{STRICT_END}",
    _cancel_employer,
    positives=[
        ("I left Google", Frame("employer", "", cancel=True, previous="google")),
        ("I quit my job at Google.", Frame("employer", "", cancel=True, previous="google")),
        ("He left IBM.", Frame("employer", "", cancel=True, previous="ibm")),
    ],
    negatives=["I left Hangzhou.", "i left google", "I left Google for Meta."],
)

LEFT_FOR = rule(
    "en.employer.left_for",
    "employer",
    "subj",
    "left|quit",
    rf"^{ADV}(?:have |has )?{NOW}(?:left|quit)\s+(?P<p>{V})\s+(?:for|to join)\s+"
    rf"(?P<v>{V}){END}",
    _employer_left_for,
    positives=[
        ("I left Google for Meta.", Frame("employer", "meta", previous="google")),
        ("I quit Oracle to join Stripe.", Frame("employer", "stripe", previous="oracle")),
    ],
    negatives=["I left Hangzhou for Shanghai.", "I left Google for the Chess Club."],
)

WORKS_AS = rule(
    "en.job_title.works_as",
    "job_title",
    "subj",
    " as ",
    rf"^{ADV}(?:work|works|am working|is working|have been working|has been working|"
    rf"started working|started work|am employed|is employed)\s+as\s+(?:a |an |the )?"
    rf"(?P<t>{V}){END}",
    _title,
    positives=[
        ("I work as a nurse", Frame("job_title", "nurse")),
        ("I work as a teacher.", Frame("job_title", "teacher")),
        ("The user works as a senior data analyst.", Frame("job_title", "senior data analyst")),
    ],
    negatives=["I work as hard as I can.", "I work as a team."],
)

IS_A = rule(
    "en.job_title.is_a",
    "job_title",
    "subj",
    "am |is |became|become",
    rf"^(?:am|is|have become|has become|became)\s+{NOW}(?:a |an )(?P<t>{JOB_TITLE_EN})"
    rf"(?:\s+(?:at|for|with)\s+(?P<v>{V}))?{END}",
    _title,
    positives=[
        ("I'm a data scientist now", Frame("job_title", "data scientist")),
        ("The user is a computer science student.", Frame("education", "computer science student")),
        (
            "I'm a software engineer at Google.",
            (Frame("job_title", "software engineer"), Frame("employer", "google")),
        ),
    ],
    negatives=["I'm a former nurse.", "I'm a big fan of jazz.", "My wife is a doctor."],
)

PROMOTED_TO = rule(
    "en.job_title.promoted_to",
    "job_title",
    "subj",
    "promoted",
    rf"^{ADV}(?:was |got |have been |has been |have got |just got )?{NOW}promoted\s+to\s+"
    rf"(?:a |an |the )?(?:(?:position|role|rank) of\s+)?(?P<t>{V}){END}",
    _title_change,
    positives=[
        ("I got promoted to senior engineer", Frame("job_title", "senior engineer", previous="")),
        (
            "I was promoted to engineering manager.",
            Frame("job_title", "engineering manager", previous=""),
        ),
    ],
    negatives=["I got promoted to the next level.", "My sister got promoted to manager."],
)

MY_TITLE_IS = rule(
    "en.job_title.my_title_is",
    "job_title",
    "poss",
    "title|role|position|job|occupation|profession",
    rf"^(?:new |current )?(?:job title|title|role|position|job|occupation|profession)\s+is"
    rf"\s+(?:now\s+)?(?:a |an )?(?P<t>{JOB_TITLE_EN}){END}",
    _title,
    positives=[
        ("My role is product manager now.", Frame("job_title", "product manager")),
        ("My job title is senior designer.", Frame("job_title", "senior designer")),
    ],
    negatives=["My role is to help the team.", "My job is boring."],
)
