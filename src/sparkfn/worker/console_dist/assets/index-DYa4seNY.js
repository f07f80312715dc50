(function(){let e=document.createElement(`link`).relList;if(e&&e.supports&&e.supports(`modulepreload`))return;for(let e of document.querySelectorAll(`link[rel="modulepreload"]`))n(e);new MutationObserver(e=>{for(let t of e)if(t.type===`childList`)for(let e of t.addedNodes)e.tagName===`LINK`&&e.rel===`modulepreload`&&n(e)}).observe(document,{childList:!0,subtree:!0});function t(e){let t={};return e.integrity&&(t.integrity=e.integrity),e.referrerPolicy&&(t.referrerPolicy=e.referrerPolicy),t.credentials=e.crossOrigin===`use-credentials`?`include`:e.crossOrigin===`anonymous`?`omit`:`same-origin`,t}function n(e){if(e.ep)return;e.ep=!0;let n=t(e);fetch(e.href,n)}})();var e,t,n,r,i,a,o,s,c,l,u=Symbol.for(`pv`),d={},f=[],p=/^m(i|n|o|s|text|space)$/,m=Array.isArray,h=f.slice,g=Object.assign;function _(e){e&&e.parentNode&&e.remove()}function v(e,t,n){var r,i,a,o={},s=arguments.length;for(a in t)a==`key`?r=t[a]:a==`ref`&&typeof e!=`function`?i=t[a]:o[a]=t[a];return s>2&&(o.children=s>3?h.call(arguments,2):n),y(e,o,r,i,null)}function y(n,r,i,a,o){var s={type:n,props:r,key:i,ref:a,__k:null,__:null,__b:0,__e:null,__c:null,constructor:u,__v:o||++t,__i:-1,__u:0};return!o&&e.vnode&&e.vnode(s),s}function b(e){return e.children}function x(e,t){this.props=e,this.context=t,this.__g=0}function S(e,t){if(t==null)return e.__&&S(e.__,e.__i+1);for(var n;t<e.__k.length;t++)if((n=e.__k[t])&&n.__e)return n.__e;return typeof e.type!=`function`||e.props.__P?null:S(e)}function C(t){var n,r=t.__v,i=r.__e,a=[],o=[],s=t.__P;s&&((n=g({constructor:u},r)).__v=r.__v+1,e.vnode&&e.vnode(n),N(s,n,r,t.__n,s.namespaceURI,32&r.__u?[i]:null,a,i||S(r),32&r.__u,o),n.__v=r.__v,n.__.__k[n.__i]=n,re(a,n,o),r.__=r.__e=null,n.__e!=i&&w(n))}function w(e){if((e=e.__)&&e.__c&&!e.props.__P)return e.__e=null,e.__k.some(function(t){return t&&(e.__e=t.__e)}),w(e)}function T(t){(8&t.__g||(t.__g|=8,n.push(t),i++))&&r==e.debounceRendering||((r=e.debounceRendering)||queueMicrotask)(E)}function E(){try{for(var e,t=1;n.length;)n.length>t&&n.sort(a),e=n.shift(),t=n.length,8&e.__g&&C(e)}finally{(i=n.length)&&(r||queueMicrotask)(E)}}function ee(e,t,n,r,i,a,o,s,c,l,u){var p,m,h,g,_,v,y=r.__k||f,b=t.length;for(c=D(n,t,y,c,b),p=0;p<b;p++)(h=n.__k[p])!=null&&(m=~h.__i&&y[h.__i]||d,h.__i=p,v=N(e,h,m,i,a,o,s,c,l,u),g=h.__e,(m.ref!=h.ref||8&m.__u)&&(m.ref&&P(m.ref,null,h,m),h.ref&&u.push(h.ref,h.__c||g,h)),_||=g,4&h.__u?(c=O(h,c,e,!m.__v),m.__e&&(m.__e=null)):typeof h.type==`function`&&v!==void 0?c=v:g&&(c=g.nextSibling),h.__u&=-21);return n.__e=_,c}function D(e,t,n,r,i){var a,o,s,c,l,d,f,p,h,g=n.length,_=g,v=0,x=0,C=e.__k=Array(i);for(a=0;a<i;a++)(o=t[a])!=null&&typeof o!=`boolean`&&typeof o!=`function`?(typeof o!=`object`||o.constructor===String?o=C[a]=y(null,o):m(o)?o=C[a]=y(b,{children:o}):o.constructor===u&&o.__b?o=C[a]=y(o.type,o.props,o.key,o.ref,o.__v):C[a]=o,c=a+v,o.__=e,o.__b=e.__b+1,s=null,~(l=o.__i=k(o,n,c,_))&&(_--,(s=n[l])&&(s.__u|=2)),s&&s.__v?(o.__u|=16,l==c-1?v--:l==c+1?v++:l!=c&&(l>c?v--:v++,x=1)):(~l||(i>g?v--:i<g&&v++),typeof o.type!=`function`&&(o.__u|=4))):C[a]=null;if(x){for(d=[],f=[],a=0;a<i;a++)if((o=C[a])&&16&o.__u){for(v=0,p=d.length;v<p;)d[h=v+p>>1]<o.__i?v=h+1:p=h;d[v]=o.__i,f[a]=v+1}for(v=d.length;a--;)f[a]&&(f[a]==v?v--:C[a].__u|=4)}if(_)for(a=0;a<g;a++)!(s=n[a])||2&s.__u||(s.__e==r&&(r=S(s)),ae(s,s));return r}function O(e,t,n,r){var i,a,o,s;if(typeof e.type==`function`){if(e.props.__P)return t;if(i=e.__k)for(a=0;a<i.length;a++)i[a]&&(i[a].__=e,t=O(i[a],t,n,!1));return t}for(t&&!t.parentNode&&(t=S(e))&&!t.parentNode&&(t=null),o=e.__e,s=t;s&&s.nodeType==8;)s=s.nextSibling;for(o!=s&&(!r&&n.moveBefore&&o.parentNode?n.moveBefore(o,t):n.insertBefore(o,t||null)),t=o;(t&&=t.nextSibling)&&t.nodeType==8&&!t.data.startsWith(`$s`););return t}function k(e,t,n,r){var i,a=e.key,o=e.type,s=t[n],c=s&&!(2&s.__u);if(s===null&&a==null||c&&a==s.key&&o==s.type)return n;if(r>+!!c){for(i=n-1;i>=0;i--)if((s=t[i])&&!(2&s.__u)&&a==s.key&&o==s.type)return i;for(i=n+1;i<t.length;i++)if((s=t[i])&&!(2&s.__u)&&a==s.key&&o==s.type)return i}return-1}function A(e,t,n){n??=``,t[0]==`-`?e.setProperty(t,n):e[t]=n}function j(e,t,n,r,i){var a,o;if(t==`style`){if(typeof n==`string`)e.style.cssText=n;else{if(typeof r==`string`&&(e.style.cssText=r=``),r)for(t in r)n&&t in n||A(e.style,t);if(n)for(t in n)r&&n[t]==r[t]||A(e.style,t,n[t])}}else if(t[0]==`o`&&t[1]==`n`)typeof n!=`function`&&(n=null),typeof r!=`function`&&(r=null),(e.__e||={})[t]=n,n&&r||(o=l[t]||(l[t]=M(t)),(e.__a||={})[t]=c,a=t!=(t=t.replace(s,`$1`)),(t=t.slice(2))[0]<`a`&&(t=t.toLowerCase()),n?e.addEventListener(t,o,a):e.removeEventListener(t,o,a));else{if(i==`http://www.w3.org/2000/svg`)t=t.replace(/xlink(H|:h)/,`h`).replace(/sName$/,`s`);else if(t!=`width`&&t!=`height`&&t!=`href`&&t!=`list`&&t!=`form`&&t!=`tabIndex`&&t!=`download`&&t!=`rowSpan`&&t!=`colSpan`&&t!=`role`&&t!=`popover`&&t in e)try{e[t]=n??``;return}catch{}if(typeof n==`function`)return;n==null||!1===n&&t[4]!=`-`?e.removeAttribute(t):e.setAttribute(t,t==`popover`&&n==1?``:n)}}function M(t){return function(n){var r=this.__e;if(r){if(r=r[t],n[o]==null)n[o]=c++;else if(n[o]<this.__a[t])return;return r(e.event?e.event(n):n)}}}function N(t,n,r,i,a,o,s,c,l,d){var p,h,v,y,C,w,T,E,D,O,k,A,j,M,N,re,P,F,I=n.type;if(n.constructor!==u)return null;128&r.__u&&(l=32&r.__u,p=r.__c.__z)&&(n.__u|=l,h=o=[],p.nodeType==8?c=te(p,o):o.push(p),c=o[0]||c),(p=e.__b)&&p(n);n:if(typeof I==`function`){v=s.length;try{if(E=n.props,D=(p=I.prototype)&&p.render,O=(p=I.contextType)&&i[p.__c],k=p?O?O.props.value:p.__:i,(y=r.__c)?(n.__c=y,2&y.__g&&(y.__g|=1)):(D?n.__c=y=new I(E,k):(n.__c=y=new x(E,k),y.constructor=I,y.render=oe),O&&O.sub(y),y.state||(y.state={}),y.__n=i,y.__g|=8,y.__h=[],y.__k=[]),D&&(y.__s||(y.__s=y.state),I.getDerivedStateFromProps&&(y.__s==y.state&&(y.__s=g({},y.__s)),g(y.__s,I.getDerivedStateFromProps(E,y.__s)))),C=y.props,w=y.state,y.__v=n,r.__c){if(E!==C&&D&&!I.getDerivedStateFromProps&&y.componentWillReceiveProps&&y.componentWillReceiveProps(E,k),n.__v==r.__v&&!(8&y.__g)||!(4&y.__g)&&y.shouldComponentUpdate&&!1===y.shouldComponentUpdate(E,y.__s,k)){n.__v!=r.__v&&(y.props=E,y.state=y.__s,y.__g&=-9),n.__e=r.__e,n.__k=r.__k,n.__k.some(function(e){e&&(e.__=n)}),f.push.apply(y.__h,y.__k),y.__k=[],y.__h.length&&s.push(y),c=S(r);break n}y.componentWillUpdate&&y.componentWillUpdate(E,y.__s,k),D&&y.componentDidUpdate&&y.__h.push(function(){y.componentDidUpdate(C,w,T)})}else D&&!I.getDerivedStateFromProps&&y.componentWillMount&&y.componentWillMount(),D&&y.componentDidMount&&y.__h.push(y.componentDidMount);y.context=k,y.props=E,y.__P=t,y.__g&=-5,A=e.__r,j=D?25:0;do y.__g&=-9,A&&A(n),p=y.render(y.props,y.state=y.__s,y.context);while(8&y.__g&&++j<25);D&&(f.push.apply(y.__h,y.__k),y.__k=[]),y.state=y.__s,y.getChildContext&&(i=g({},i,y.getChildContext())),D&&r.__c&&y.getSnapshotBeforeUpdate&&(T=y.getSnapshotBeforeUpdate(C,w)),M=p&&p.type===b&&p.key==null?p.props.children:p,E.__P&&(p=c,a=(t=E.__P).namespaceURI,l=o=null,r.props&&r.props.__P!=t&&(r.__k.some(function(e){e&&ae(e,e)}),r.__k=null),c=r.__k?S(r,0):null),c=ee(t,m(M)?M:[M],n,r,i,a,o,s,c,l,d),E.__P&&(n.__e=null,c=p),n.__u&=-161,h&&h.some(_),y.__h.length&&s.push(y),1&y.__g&&(y.__g&=-4)}catch(t){if(s.length=v,n.__v=null,l||o){if(t&&t.then){if(n.__u|=128|l,o){for(~(P=o.indexOf(c||void 0))||(P=o.length);(F=o[P-1])&&F.nodeType==8;)P--;for(;P<o.length;P++)if(F=o[P]){if(o[P]=null,N){if(F==re)break}else{if(F.nodeType!=8)break;F.data.startsWith(`$s`)&&(re=te(N=F))}}}if(!N){for(;c&&c.nodeType==8&&c.nextSibling;)c=c.nextSibling;N=c}(p=te(N=n.__c.__z||(n.__c.__z=N)))?(n.__e=N,c=p):n.__e=c,c&&=c.nextSibling}else o&&o.some(_)}else n.__e=r.__e;n.__k||=r.__k||[],t&&t.then||ne(n),e.__e(t,n,r)}}else c=n.__e=ie(r.__e,n,r,i,a,o,s,l,d,t);return(p=e.diffed)&&p(n),c}function te(e,t){if(e&&e.nodeType==8&&e.data.startsWith(`$s`))for(var n=1;e=e.nextSibling;){if(e.nodeType==8){if(e.data.startsWith(`$s`))n++;else if(e.data.startsWith(`/$s`)&&!--n)return e}t&&t.push(e)}}function ne(e){e&&(e.__c&&(e.__c.__g|=4),e.__k&&e.__k.some(ne))}function re(t,n,r){for(var i=0;i<r.length;)P(r[i++],r[i++],r[i++]);e.__c&&e.__c(n,t),t.some(function(n){try{t=n.__h,n.__h=[],t.some(function(e){e.call(n)})}catch(t){e.__e(t,n.__v)}})}function ie(t,n,r,i,a,o,s,c,l,u){var f,g,v,y,b,x,C,w,T=r.props||d,E=n.props,D=n.type;if(D==`svg`?a=`http://www.w3.org/2000/svg`:D==`math`?a=`http://www.w3.org/1998/Math/MathML`:a||=`http://www.w3.org/1999/xhtml`,o){for(f=0;f<o.length;f++)if((b=o[f])&&(D?b.localName==D:b.nodeType==3)){t=b,o[f]=null;break}}if(!t){if(w=u.ownerDocument||document,!D)return w.createTextNode(E);t=w.createElementNS(a,D,E.is?E:u),c&&=(e.__m&&e.__m(n,o),!1),o=null}if(D){if(u=D==`template`&&t.content||t,o=D==`textarea`&&E.defaultValue!=null?null:o&&h.call(u.childNodes),!c&&o)for(T={},f=0;f<t.attributes.length;f++)T[(b=t.attributes[f]).name]=b.value;for(f in T)b=T[f],f==`dangerouslySetInnerHTML`?v=b:f==`children`||f in E||f==`value`&&`defaultValue`in E||f==`checked`&&`defaultChecked`in E||j(t,f,null,b,a);for(f in E)b=E[f],f==`children`?y=b:f==`dangerouslySetInnerHTML`?g=b:f==`value`?x=b:f==`checked`?C=b:c&&typeof b!=`function`||T[f]===b||j(t,f,b,T[f],a);g?(c||v&&(g.__html==v.__html||g.__html==t.innerHTML)||(t.innerHTML=g.__html),n.__k=[]):(v&&(t.textContent=``),(D==`foreignObject`||a==`http://www.w3.org/1998/Math/MathML`&&p.test(D))&&(a=`http://www.w3.org/1999/xhtml`),ee(u,m(y)?y:[y],n,r,i,a,o,s,o?o[0]:r.__k&&S(r,0),c,l),o&&o.some(_)),c&&D!=`textarea`||(f=`value`,D==`progress`&&x==null?t.removeAttribute(f):x==null||x===t[f]&&(D!=`progress`||x)||j(t,f,x,T[f],a),f=`checked`,C!=null&&C!=t[f]&&j(t,f,C,T[f],a))}else T===E||c&&t.data==E||(t.data=E);return t}function P(t,n,r,i){try{typeof t==`function`?n?n.__x=t(n)||1:(i&&=i.__c||i.__e)&&(n=i.__x)&&(i.__x=null,typeof n==`function`?n():t(null)):t.current=n}catch(t){e.__e(t,r)}}function ae(t,n,r){var i,a,o,s;if(e.unmount&&e.unmount(t),!(i=t.ref)||i.current&&i.current!=t.__e||P(i,null,n,t),i=t.__c){if(i.componentWillUnmount)try{i.componentWillUnmount()}catch(t){e.__e(t,n)}i.__P=i.__n=null}if(i=t.__k)for(s=0;s<i.length;s++)i[s]&&ae(i[s],n,typeof t.type!=`function`||r&&!t.props.__P);!r&&(i=t.__c)&&(i=i.__z)&&(a=te(i,o=[]))&&(i==t.__e&&o.some(_),_(a),_(i)),r||_(t.__e),t.__e=t.__c=t.__=null}function oe(e,t,n){return this.constructor(e,n)}function F(t,n){var r,i,a,o;e.__&&e.__(t,n),n.nodeType==9&&(n=n.documentElement),i=(r=t&&32&t.__u)?null:n.__k,n.__k=y(b,{children:[t]}),a=[],o=[],N(n,n.__k,i||d,d,n.namespaceURI,i?null:n.firstChild?h.call(n.childNodes):null,a,i?i.__e:n.firstChild,r,o),re(a,n.__k,o),n.__k.props.children=null}e={__e:function(e,t,n,r){for(var a,o,s;t=t.__;)if((a=t.__c)&&!(1&a.__g)){a.__g|=4;try{if((s=(o=a.constructor)&&o.getDerivedStateFromError)&&a.setState(o.getDerivedStateFromError(e)),a.componentDidCatch&&(a.componentDidCatch(e,r||{}),s=1),s&&8&a.__g)return void(a.__g|=2)}catch(t){e=t}}throw i=0,e}},t=0,x.prototype.setState=function(e,t){var n=this.__s;n&&n!=this.state||(n=this.__s=g({},this.state)),typeof e==`function`&&(e=e(g({},n),this.props)),e&&(g(n,e),this.__v&&(t&&this.__k.push(t),T(this)))},x.prototype.forceUpdate=function(e){this.__v&&(this.__g|=4,e&&this.__h.push(e),T(this))},x.prototype.render=b,n=[],i=0,a=function(e,t){return e.__v.__b-t.__v.__b},o=Symbol(),s=/(PointerCapture)$|Capture$/i,c=0,l={};var I,L,se,ce,le=Object.is,ue=0,de=[],fe=[],R=e,pe=R.__b,me=R.__r,he=R.diffed,ge=R.__c,_e=R.unmount,ve=R.__;function ye(e,t){R.__h&&R.__h(L,e,ue||t),ue=0;var n=L.__H||(L.__H={__:[],__h:[]});return e>=n.__.length&&n.__.push({}),n.__[e]}function z(e){return ue=1,be(ke,e)}function be(e,t,n){var r=ye(I++,2);if(r.t=e,!r.__c&&(r.__=[n?n(t):ke(void 0,t),function(e){var t=(r.__N||r.__)[0],n=r.t(t,e);le(t,n)||(r.__N=[n,r.__[1]],r.__c.setState({}))}],r.__c=L,!L.__f)){L.__f=!0;var i=L.shouldComponentUpdate;L.shouldComponentUpdate=function(e,t,n){var r=this.__H;if(!r)return!0;var a=!1,o=this.props!=e;if(r.__.some(function(e){e.__N&&(a=!0,le(e.__[0],e.__N[0])||(o=!0))}),i){var s=i.call(this,e,t,n);return a?s||o:s}return!a||o}}return r.__}function B(e,t){var n=ye(I++,3);!R.__s&&Oe(n.__H,t)&&(n.__P=!0,n.__=e,n.u=t,L.__H.__h.push(n))}function xe(e){return ue=5,Se(function(){return{current:e}},[])}function Se(e,t){var n=ye(I++,7);return Oe(n.__H,t)&&(n.__=e(),n.__H=t),n.__}function Ce(){var e;do{for(;e=fe.shift();)try{V(e)}catch(t){R.__e(t,{__:(e=e.__P)&&e.__v})}for(;e=de.shift();){var t=e.__H;if(e.__P&&t)try{t.__h.some(V),t.__h.some(De),t.__h=[]}catch(n){t.__h=[],R.__e(n,e.__v)}}}while(fe.length)}R.__b=function(e){L=null,pe&&pe(e)},R.__=function(e,t){e&&t.__k&&t.__k.__m&&(e.__m=t.__k.__m),ve&&ve(e,t)},R.__r=function(e){me&&me(e),I=0;var t=(L=e.__c).__H;t&&(se==L?L.__h=[]:(t.__h.some(V),t.__h.some(De),I=0),t.__h=[],t.__.some(function(e){e.__N&&(e.__=e.__N),e.u=e.__N=void 0})),se=L},R.diffed=function(e){he&&he(e);var t=e.__c;t&&t.__H&&(t.__H.__h.length&&Ee(de.push(t)),t.__H.__.some(function(e){e.u&&(e.__H=e.u)})),se=L=null},R.__c=function(e,t){t.some(function(e){try{e.__h.some(V),e.__h=e.__h.filter(function(e){return!e.__||De(e)})}catch(t){e.__h=[function(){throw t}]}}),ge&&ge(e,t)},R.unmount=function(e){_e&&_e(e);var t,n,r=e.__c;r&&r.__H&&(r.__H.__.some(function(r){try{if(r.__P&&r.__c){if(n===void 0){for(n=e.__;n&&(!n.__c||!n.__c.__P);)n=n.__;n&&=n.__c}r.__P=n,Ee(fe.push(r))}else V(r)}catch(e){t=e}}),r.__H=void 0,t&&R.__e(t,r.__v))};var we=typeof requestAnimationFrame==`function`;function Te(e){var t,n=function(){clearTimeout(r),we&&cancelAnimationFrame(t),setTimeout(e)},r=setTimeout(n,35);we&&(t=requestAnimationFrame(n))}function Ee(e){e!=1&&ce==R.requestAnimationFrame||((ce=R.requestAnimationFrame)||Te)(Ce)}function V(e){var t=L,n=e.__c;typeof n==`function`&&(e.__c=void 0,n()),L=t}function De(e){var t=L;e.__c=e.__(),L=t}function Oe(e,t){return!e||e.length!=t.length||t.some(function(t,n){return!le(t,e[n])})}function ke(e,t){return typeof t==`function`?t(e):t}function Ae(e){let t=e,n=new Set;return{get:()=>t,set(e){t=e;for(let t of n)t(e)},subscribe(e){return n.add(e),()=>n.delete(e)}}}function je(e){let[t,n]=z(e.get());return B(()=>e.subscribe(n),[e]),t}var Me=`sparkfn.token`,Ne=Ae(!1),Pe=Ae(``),Fe=class extends Error{constructor(e,t,n){super(n),this.status=e,this.reason=t}};function Ie(){return sessionStorage.getItem(Me)||``}function Le(e){e?sessionStorage.setItem(Me,e):sessionStorage.removeItem(Me)}async function H(e,t,n,{raw:r=!1}={}){let i={},a=Ie();a&&(i.Authorization=`Bearer ${a}`);let o=n;n!==void 0&&!(n instanceof FormData)&&(i[`Content-Type`]=`application/json`,o=JSON.stringify(n));let s=await fetch(t,{method:e,headers:i,body:o});if(s.status===401){let e=await s.json().catch(()=>({}));throw Pe.set(a?`The worker refused the token: ${e.message||`401`}`:``),Ne.set(!0),new Fe(401,e.reason||`unauthorized`,e.message||`unauthorized`)}if(!s.ok){let e=await s.json().catch(()=>({}));throw new Fe(s.status,e.reason||`http_${s.status}`,e.message||s.statusText)}return r?s:s.status===204?null:(s.headers.get(`content-type`)||``).includes(`json`)?s.json():s.text()}var U=e=>H(`GET`,e),Re=(e,t)=>H(`POST`,e,t),W=e=>`/admin/v3/functions/${e.split(`/`).map(encodeURIComponent).join(`/`)}`,ze=(e,t,n)=>`/admin/v2/persistent/${[e,t,n].map(encodeURIComponent).join(`/`)}`;function G(e,t){if(!e)return;if(t in e)return e[t];let n=t.replace(/_([a-z])/g,(e,t)=>t.toUpperCase());if(n in e)return e[n]}function Be(e){let t=String(e).replace(/^(non-)?persistent:\/\//,``).split(`/`);return t.length===1?[`public`,`default`,t[0]]:t}var Ve=function(e,t,n,r){var i;t[0]=0;for(var a=1;a<t.length;a++){var o=t[a++],s=t[a]?(t[0]|=o?1:2,n[t[a++]]):t[++a];o===3?r[0]=s:o===4?r[1]=Object.assign(r[1]||{},s):o===5?(r[1]=r[1]||{})[t[++a]]=s:o===6?r[1][t[++a]]+=s+``:o?(i=e.apply(s,Ve(e,s,n,[``,null])),r.push(i),s[0]?t[0]|=2:(t[a-2]=0,t[a]=i)):r.push(s)}return r},He=new Map;function Ue(e){var t=He.get(this);return t||(t=new Map,He.set(this,t)),(t=Ve(this,t.get(e)||(t.set(e,t=function(e){for(var t,n,r=1,i=``,a=``,o=[0],s=function(e){r===1&&(e||(i=i.replace(/^\s*\n\s*|\s*\n\s*$/g,``)))?o.push(0,e,i):r===3&&(e||i)?(o.push(3,e,i),r=2):r===2&&i===`...`&&e?o.push(4,e,0):r===2&&i&&!e?o.push(5,0,!0,i):r>=5&&((i||!e&&r===5)&&(o.push(r,0,i,n),r=6),e&&(o.push(r,e,0,n),r=6)),i=``},c=0;c<e.length;c++){c&&(r===1&&s(),s(c));for(var l=0;l<e[c].length;l++)t=e[c][l],r===1?t===`<`?(s(),o=[o],r=3):i+=t:r===4?i===`--`&&t===`>`?(r=1,i=``):i=t+i[0]:a?t===a?a=``:i+=t:t===`"`||t===`'`?a=t:t===`>`?(s(),r=1):r&&(t===`=`?(r=5,n=i,i=``):t===`/`&&(r<5||e[c][l+1]===`>`)?(s(),r===3&&(o=o[0]),r=o,(o=o[0]).push(2,0,r),r=0):t===` `||t===`	`||t===`
`||t===`\r`?(s(),r=2):i+=t),r===3&&i===`!--`&&(r=4,o=o[0])}return s(),o}(e)),t),arguments,[])).length>1?t:t[0]}var K=Ue.bind(v),We={RUNNING:`ok`,PARKED:`parked`,STARTING:`busy`,RESTARTING:`warn`,STOPPING:`busy`,STOPPED:`off`,SUSPENDED:`off`,CREATED:`off`,ERROR:`bad`};function Ge({state:e}){return K`<span class="badge tone-${We[e]||`off`}" data-state=${e}>${e}</span>`}function q(e,t,n=0){let[r,i]=z(null),[a,o]=z(null),s=xe(!0),c=async()=>{try{let t=await e();s.current&&(i(t),o(null))}catch(e){s.current&&o(e)}};return B(()=>{s.current=!0,c();let e=n?setInterval(c,n):null;return()=>{s.current=!1,e&&clearInterval(e)}},t),[r,a,c]}function J({error:e}){return e?K`<p class="error" role="alert">
    ${e.reason?K`<code>${e.reason}</code> `:``}${e.message}
  </p>`:null}function Y(e){return e?new Date(e).toISOString().replace(`T`,` `).replace(/\.\d+Z$/,`Z`):`never`}function Ke(e){let t=Math.floor(e),n=Math.floor(t/86400),r=[Math.floor(t%86400/3600),Math.floor(t%3600/60),t%60];return(n?`${n}d `:``)+r.map(e=>String(e).padStart(2,`0`)).join(`:`)}function X(e,t=1){return e==null||Number.isNaN(e)?`–`:Math.abs(e)>=1e3?Math.round(e).toLocaleString(`en`):Number.isInteger(e)?String(e):Math.abs(e)<1?e.toPrecision(2):e.toFixed(t)}function qe({title:e,points:t,unit:n,testid:r,caption:i}){let a=t.map(e=>e.v),o=Math.max(1e-9,...a),s=a.length?a[a.length-1]:null,c=t.length?t[0].t:0,l=t.length?t[t.length-1].t:1,u=e=>4+(e-c)/Math.max(1,l-c)*312,d=e=>92-e/o*88,f=t.map((e,t)=>`${t?`L`:`M`}${u(e.t).toFixed(1)},${d(e.v).toFixed(1)}`).join(` `),p=t.length?`${f} L${u(l)},92 L${u(c)},92 Z`:``;return K`<figure class="chart" data-testid=${r} data-points=${t.length}>
    <figcaption>
      <span class="chart-title">${e}</span>
      <span class="chart-value" data-testid=${`${r}-value`}>${X(s)} ${n}</span>
    </figcaption>
    <svg viewBox="0 0 ${320} ${96}" role="img" aria-label="${e}: ${X(s)} ${n}">
      <line x1="0" x2=${320} y1=${92} y2=${92} class="axis" />
      ${p&&K`<path d=${p} class="area" />`}
      ${f&&K`<path d=${f} class="line" />`}
      ${t.length>1&&Math.max(...a)>0&&K`<text x="2" y="11" class="max">${X(o)}</text>`}
    </svg>
    ${i&&K`<div class="chart-caption">${i}</div>`}
  </figure>`}function Je({value:e}){return K`<pre class="json">${JSON.stringify(e,null,2)}</pre>`}var Z=50,Ye=[`RUNNING`,`PARKED`,`STOPPED`,`SUSPENDED`,`ERROR`,`CREATED`];function Xe(e,t){let[n,r]=z(e);return B(()=>{let n=setTimeout(()=>r(e),t);return()=>clearTimeout(n)},[e]),n}function Ze({fn:e}){let t=new Map(e.instances.map(e=>[e.instanceId,e]));return K`<span class="dots" aria-label="instances">
    ${Array.from({length:Math.max(e.parallelism,e.instances.length)},(e,t)=>t).map(e=>{let n=t.get(e),r=n?n.state:`CREATED`;return K`<span class="dot tone-${r}" title="instance ${e}: ${r}${n&&n.cause?` (${n.cause})`:``}"
        data-instance=${e} data-state=${r}></span>`})}
  </span>`}async function Qe(){let e=[];for(let t of await U(`/admin/v2/tenants`))e.push(...await U(`/admin/v2/namespaces/${encodeURIComponent(t)}`));return e}function $e(){let e=new URLSearchParams(location.hash.split(`?`)[1]||``),[t,n]=z(e.get(`q`)||``),[r,i]=z(e.get(`state`)||``),[a,o]=z(e.get(`ns`)||``),[s]=q(Qe,[],3e4),[c,l]=z(Number(e.get(`offset`)||0)),u=Xe(t,150);B(()=>l(0),[u,r,a]),B(()=>{let e=new URLSearchParams;u&&e.set(`q`,u),r&&e.set(`state`,r),a&&e.set(`ns`,a),c&&e.set(`offset`,c);let t=`#/functions${e.toString()?`?${e}`:``}`;location.hash!==t&&history.replaceState(null,``,t)},[u,r,a,c]);let[d,f]=q(()=>{let e=new URLSearchParams({search:u,offset:c,limit:Z});return r&&e.set(`state`,r),a&&e.set(`namespace`,a),U(`/admin/v3/functions?${e}`)},[u,r,a,c],3e3),p=null,m=d?d.total:0;return K`<section aria-labelledby="fn-title">
    <div class="page-head">
      <h1 id="fn-title">Functions</h1>
      <a class="button primary" href="#/new">New function</a>
    </div>
    <div class="toolbar">
      <label class="search">
        <span class="sr-only">Search functions</span>
        <input type="search" data-search placeholder="Search tenant/namespace/name  ( / )"
          value=${t} onInput=${e=>n(e.target.value)} aria-describedby="fn-count" />
      </label>
      <label class="inline-label">Namespace
        <select value=${a} onChange=${e=>o(e.target.value)}>
          <option value="">all</option>
          ${(s||[]).map(e=>K`<option value=${e}>${e}</option>`)}
        </select>
      </label>
      <div class="chips" role="group" aria-label="Filter by state">
        <button class="chip" aria-pressed=${r===``} onClick=${()=>i(``)}>
          All ${d?K`<span class="count">${Object.values(d.states).reduce((e,t)=>e+t,0)}</span>`:``}
        </button>
        ${Ye.map(e=>K`<button class="chip" aria-pressed=${r===e} onClick=${()=>i(r===e?``:e)}>
            ${e.toLowerCase()} <span class="count">${d?d.states[e]||0:``}</span>
          </button>`)}
      </div>
    </div>
    <${J} error=${f} />
    <p id="fn-count" class="muted" data-testid="fn-count">
      ${d?m?`${d.offset+1}–${d.offset+d.functions.length} of ${m}`:`No function matches`:`Loading…`}
    </p>
    ${d&&d.functions.length>0&&K`<table class="list">
      <thead><tr><th scope="col">Function</th><th scope="col">State</th><th scope="col">Instances</th>
        <th scope="col">Version</th><th scope="col">Wanted</th></tr></thead>
      <tbody>
        ${d.functions.map(e=>{let t=`${e.tenant}/${e.namespace}`,n=t!==p;return p=t,K`${n&&K`<tr class="group"><th colspan="5" scope="rowgroup">${t}</th></tr>`}
            <tr data-fqfn=${e.fqfn}>
              <td><a href=${`#/functions/${e.fqfn}`}>${e.name}</a></td>
              <td><${Ge} state=${e.state} /></td>
              <td><${Ze} fn=${e} /></td>
              <td>v${e.version}</td>
              <td class="muted">${e.desired}</td>
            </tr>`})}
      </tbody>
    </table>`}
    ${d&&m>Z&&K`<nav class="pager" aria-label="Pages">
      <button disabled=${c===0} onClick=${()=>l(Math.max(0,c-Z))}>← Previous</button>
      <span>Page ${Math.floor(c/Z)+1} of ${Math.ceil(m/Z)}</span>
      <button disabled=${c+Z>=m} onClick=${()=>l(c+Z)}>Next →</button>
    </nav>`}
  </section>`}function et(e){let t=Uint8Array.from(atob(e),e=>e.charCodeAt(0));return Array.from(t,e=>e.toString(16).padStart(2,`0`)).join(` `)}function tt({value:e}){return e.numberValue!==null&&e.numberValue!==void 0?K`<p><span class="muted">counter</span> <strong data-testid="state-value">${e.numberValue}</strong></p>`:e.stringValue!==null&&e.stringValue!==void 0?K`<p><span class="muted">text</span></p><pre data-testid="state-value">${e.stringValue}</pre>`:e.byteValue?K`<p><span class="muted">bytes (hex)</span></p><pre data-testid="state-value">${et(e.byteValue)}</pre>`:K`<p class="muted" data-testid="state-value">(empty)</p>`}function nt({fqfn:e}){let[t,n]=z(``),[r,i]=z(null),[a,o]=z(null),[s,c]=z(``),[l,u]=z(``),[d,f]=z(`text`),[p,m]=z(``);return K`<section class="card" aria-labelledby="state-title">
    <h2 id="state-title">State</h2>
    <form class="inline" onSubmit=${async n=>{n.preventDefault(),o(null),i(null);try{i(await U(`${W(e)}/state/${encodeURIComponent(t)}`))}catch(e){o(e)}}}>
      <label for="state-key">Key</label>
      <input id="state-key" value=${t} required onInput=${e=>n(e.target.value)} />
      <button type="submit">Get</button>
    </form>
    ${r&&K`<div class="state-value">${K`<${tt} value=${r} />`}</div>`}
    <form class="inline" onSubmit=${async t=>{t.preventDefault(),o(null),m(``);let n={key:s};if(d===`counter`){if(!/^-?\d+$/.test(l.trim())){o({reason:`invalid_request`,message:`a counter is a whole number; got ${JSON.stringify(l)}`});return}n.numberValue=Number(l.trim())}else n.stringValue=l;let r=new FormData;r.set(`state`,JSON.stringify(n));try{await Re(`${W(e)}/state/${encodeURIComponent(s)}`,r),m(`${s} saved`)}catch(e){o(e)}}}>
      <label for="put-key">Key</label>
      <input id="put-key" value=${s} required onInput=${e=>c(e.target.value)} />
      <label for="put-kind" class="sr-only">Kind</label>
      <select id="put-kind" value=${d} onChange=${e=>f(e.target.value)}>
        <option value="text">text</option><option value="counter">counter</option>
      </select>
      <label for="put-value">Value</label>
      <input id="put-value" value=${l} onInput=${e=>u(e.target.value)} />
      <button type="submit">Put</button>
    </form>
    ${p&&K`<p class="muted small" role="status">${p}</p>`}
    <${J} error=${a} />
  </section>`}var rt=2e3;async function it(e){let t=(await U(`/admin/v3/functions?${new URLSearchParams({search:e,limit:50})}`)).functions.find(t=>t.fqfn===e);if(!t)throw new Fe(404,`function_not_found`,`function ${e} does not exist`);return t}function at(e){return e&&e.config&&typeof e.config==`object`?e.config:e}async function ot(e,t){let n=G(t,`inputs`)||[],r=G(t,`subscription_name`)||e,i=0;for(let e of n){let[t,n,a]=Be(e),o=await U(`${ze(t,n,a)}/stats`).catch(()=>null),s=o&&o.subscriptions&&o.subscriptions[r];s&&(i+=s.msgBacklog||0)}return i}function st(e,t){let[n,r]=z({throughput:[],latency:[],lag:[],exceptions:[],processed:0}),i=xe(null);return B(()=>{let n=!0;i.current=null,r({throughput:[],latency:[],lag:[],exceptions:[],processed:0});let a=async()=>{try{let[a,o]=await Promise.all([U(`${W(e)}/stats`),t?ot(e,t):Promise.resolve(0)]);if(!n)return;let s=Date.now(),c=a.processedSuccessfullyTotal||0,l=(a.userExceptionsTotal||0)+(a.systemExceptionsTotal||0),u=i.current;i.current={now:s,processed:c,failed:l},r(e=>{let t=u?(s-u.now)/1e3:0,n=(e,t)=>[...e,{t:s,v:t}].slice(-90);return{processed:c,throughput:t?n(e.throughput,Math.max(0,c-u.processed)/t):e.throughput,exceptions:t?n(e.exceptions,Math.max(0,l-u.failed)):e.exceptions,latency:n(e.latency,a.avgProcessLatency||0),lag:n(e.lag,o),failed:l}})}catch{}};a();let o=setInterval(a,rt);return()=>{n=!1,clearInterval(o)}},[e,t]),n}function ct({fqfn:e,onDone:t,instance:n}){let[r,i]=z(``),[a,o]=z(null),[s,c]=z(``),l=n===void 0?W(e):`${W(e)}/${n}`,u=[`start`,`stop`,`drain`,`suspend`,`restart`],d=async e=>{i(e),o(null),c(``);try{await Re(`${l}/${e}`),c(`${e}: done`),t&&t()}catch(e){o(e)}finally{i(``)}},f=n===void 0?``:` instance ${n}`;return K`<div class="actions" role="group" aria-label="Lifecycle${f}">
    ${u.map(e=>K`<button onClick=${()=>d(e)} disabled=${!!r} data-action=${e}
        aria-label="${e}${f}" class=${e===`start`?`primary-outline`:``}>
        ${r===e?`…`:e[0].toUpperCase()+e.slice(1)}</button>`)}
    ${s&&K`<span class="muted small" role="status">${s}</span>`}
    <${J} error=${a} />
  </div>`}function lt({status:e}){let t=[];for(let n of e.instances||[]){let e=n.status;for(let r of e.latestUserExceptions||[])t.push({kind:`user`,id:n.instanceId,...r});for(let r of e.latestSystemExceptions||[])t.push({kind:`system`,id:n.instanceId,...r})}t.sort((e,t)=>t.timestampMs-e.timestampMs);let n=(e.instances||[]).filter(e=>e.status.deathException);return K`<section class="card" aria-labelledby="exc-title">
    <h2 id="exc-title">Exceptions</h2>
    ${n.map(e=>{let t=e.status.deathException;return K`<details class="death" open>
        <summary><span class="badge tone-bad">death</span> instance ${e.instanceId}: <code>${t.type}</code> ${t.message}
          ${t.origin&&K`<span class="muted"> (${t.origin})</span>`}</summary>
        <pre class="trace">${t.traceback||`(no traceback)`}</pre>
      </details>`})}
    ${t.length===0&&n.length===0&&K`<p class="muted">None recorded.</p>`}
    ${t.slice(0,20).map(e=>K`<details>
        <summary><span class="badge ${e.kind===`user`?`tone-warn`:`tone-bad`}">${e.kind}</span>
          ${` `}instance ${e.id} · ${Y(e.timestampMs)} · <code>${e.exceptionString}</code>
          ${e.messageId&&K`<span class="muted"> · message ${e.messageId}</span>`}</summary>
        <pre class="trace">${e.traceback||`(no traceback)`}</pre>
      </details>`)}
  </section>`}function ut({fqfn:e}){let[t,n]=q(()=>U(`${W(e)}/transitions`),[e],5e3);return K`<section class="card" aria-labelledby="life-title">
    <h2 id="life-title">Lifecycle record</h2>
    <${J} error=${n} />
    ${t&&t.length===0&&K`<p class="muted">No transition yet: the function never ran.</p>`}
    ${t&&t.length>0&&K`<div class="scroll"><table class="list compact" data-testid="transitions">
      <thead><tr><th scope="col">Time</th><th scope="col">Of</th><th scope="col">From</th><th scope="col">To</th><th scope="col">Cause</th></tr></thead>
      <tbody>${[...t].reverse().map(e=>K`<tr><td class="nowrap">${Y(e.at)}</td><td>${e.instance===null?`function`:`instance ${e.instance}`}</td>
          <td>${e.fromState||`–`}</td><td><${Ge} state=${e.toState} /></td><td>${e.cause}</td></tr>`)}</tbody></table></div>`}
  </section>`}function dt({fqfn:e,current:t}){let[n,r]=z(t);B(()=>r(t),[t]);let[i,a]=q(()=>U(`${W(e)}?version=${n}`),[e,n]);return K`<section class="card" aria-labelledby="cfg-title">
    <div class="card-head">
      <h2 id="cfg-title">Config</h2>
      <label>Version
        <select value=${n} onChange=${e=>r(Number(e.target.value))}>
          ${Array.from({length:t},(e,n)=>t-n).map(e=>K`<option value=${e}>v${e}${e===t?` (current)`:``}</option>`)}
        </select>
      </label>
    </div>
    <${J} error=${a} />
    ${i&&i.createdAt&&K`<p class="muted small">Created ${Y(i.createdAt)} by ${i.createdBy}
      ${i.packageDigest&&K` · package <code>${i.packageDigest.slice(0,19)}…</code>`}</p>`}
    ${i&&K`<${Je} value=${at(i)} />`}
  </section>`}function ft({fqfn:e}){let[t,n,r]=q(()=>it(e),[e],3e3),[i,a,o]=q(()=>U(`${W(e)}/status`),[e],rt),[s]=q(()=>U(W(e)),[e,t&&t.version]),c=st(e,at(s)),l=()=>{r(),o()},[u,d,f]=e.split(`/`);return K`<section aria-labelledby="fn-name">
    <nav class="crumbs" aria-label="Breadcrumb"><a href="#/functions">Functions</a> / ${u}/${d}</nav>
    <div class="page-head">
      <h1 id="fn-name">${f}</h1>
      ${t&&K`<${Ge} state=${t.state} />`}
      ${t&&K`<span class="muted">v${t.version} · wanted ${t.desired}</span>`}
      <div class="spacer"></div>
      <a class="button" href=${`#/update/${e}`}>Update…</a>
    </div>
    <${J} error=${n||a} />
    <${ct} fqfn=${e} onDone=${l} />
    <div class="charts" aria-label="Live metrics">
      <${qe} title="Throughput" unit="msg/s" testid="chart-throughput" points=${c.throughput}
        caption=${K`<span data-testid="processed-total">${X(c.processed)}</span> processed`} />
      <${qe} title="Process latency" unit="ms" testid="chart-latency" points=${c.latency} caption="average, per message" />
      <${qe} title="Input lag" unit="msgs" testid="chart-lag" points=${c.lag} caption="backlog of its subscription" />
      <${qe} title="Exceptions" unit="per sample" testid="chart-exceptions" points=${c.exceptions}
        caption=${`${X(c.failed||0)} in all`} />
    </div>
    ${i&&K`<section class="card" aria-labelledby="inst-title">
      <h2 id="inst-title">Instances <span class="muted">${i.numRunning} of ${i.numInstances} running · ${i.numRestarts} restarts</span></h2>
      <div class="scroll"><table class="list compact" data-testid="instances">
        <thead><tr><th scope="col">#</th><th scope="col">State</th><th scope="col">Received</th><th scope="col">Processed</th>
          <th scope="col">User exc.</th><th scope="col">System exc.</th><th scope="col">Dead-lettered</th><th scope="col">Avg latency</th>
          <th scope="col">Last invocation</th><th scope="col">Actions</th></tr></thead>
        <tbody>${i.instances.map(t=>K`<tr data-instance=${t.instanceId}>
          <td>${t.instanceId}</td><td><${Ge} state=${t.status.state} />${t.status.error&&K` <span class="muted small">${t.status.error}</span>`}</td>
          <td>${X(t.status.numReceived)}</td><td>${X(t.status.numSuccessfullyProcessed)}</td>
          <td>${X(t.status.numUserExceptions)}</td><td>${X(t.status.numSystemExceptions)}</td>
          <td>${X(t.status.numDeadLettered)}</td><td>${X(t.status.averageLatency)} ms</td>
          <td class="nowrap">${Y(t.status.lastInvocationTime)}</td>
          <td><${ct} fqfn=${e} instance=${t.instanceId} onDone=${l} /></td></tr>`)}
        </tbody></table></div>
    </section>`}
    ${i&&K`<${lt} status=${i} />`}
    <div class="two">
      <${ut} fqfn=${e} />
      <${nt} fqfn=${e} />
    </div>
    ${t&&K`<${dt} fqfn=${e} current=${t.version} />`}
    <${pt} fqfn=${e} />
  </section>`}function pt({fqfn:e}){let[t,n]=z(null);return K`<div class="danger-zone"><button class="danger" onClick=${async()=>{if(confirm(`Delete ${e}? Its state, checkpoints and subscription go too.`))try{await H(`DELETE`,W(e)),location.hash=`#/functions`}catch(e){n(e)}}}>Delete function…</button>
    <${J} error=${t} /></div>`}var mt=/^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$/,ht=[`.py`,`.zip`,`.whl`],gt=`letters, digits, '_', '-', '.', starting with a letter or digit, at most 128 characters`;function _t(e,t){let n=t.replace(/^(non-)?persistent:\/\//,``).split(`/`);if(n.length!==1&&n.length!==3)return`${e} ${Q(t)}: a topic is name or tenant/namespace/name`;for(let r of n)if(!mt.test(r))return`${e} ${Q(t)}: ${Q(r)} is not a valid name (${gt})`;return null}var Q=e=>String(e).includes(`'`)&&!String(e).includes(`"`)?`"${e}"`:`'${String(e).replace(/'/g,`\\'`)}'`,vt=e=>e.split(/[\s,]+/).map(e=>e.trim()).filter(Boolean);function yt(e,t){let n={},r=`function ${e.tenant}/${e.namespace}/${e.name}`;for(let t of[`tenant`,`namespace`,`name`])mt.test(e[t])||(n[t]=`${t} ${Q(e[t])} is not a valid name (${gt})`);let i=vt(e.inputs);!i.length&&!e.topicsPattern.trim()&&(n.inputs=`${r}: a function needs inputs (or topics_pattern); got neither`);for(let e of i){let t=_t(`inputs`,e);t&&(n.inputs=t)}let a=new Set;for(let e of i)a.has(e)&&(n.inputs=`${r}: inputs lists a topic twice: ${e}`),a.add(e);if(e.topicsPattern.trim())try{new RegExp(e.topicsPattern)}catch(t){n.topicsPattern=`${r}: topics_pattern ${Q(e.topicsPattern)} is not a valid regular expression: ${t.message}`}for(let[t,a]of[[`output`,`output`],[`logTopic`,`log_topic`],[`deadLetterTopic`,`dead_letter_topic`]]){if(!e[t].trim())continue;let o=_t(a,e[t].trim());o?n[t]=o:i.includes(e[t].trim())&&(n[t]=`${r}: topic ${e[t].trim()} is both an input and an output of the function; that would loop`)}t&&!e.file&&!e.url.trim()&&(n.file=`${r}: give the package (a .py, .zip or .whl file) or the path or digest of one uploaded before`),e.file&&!ht.some(t=>e.file.name.endsWith(t))&&(n.file=`${r}: the package ${Q(e.file.name)} is none of ${ht.join(`, `)}`),e.file&&e.file.name.endsWith(`.zip`)&&!e.classname.trim()&&(n.classname=`${r}: a .zip package needs classname (module.attr)`),e.classname.trim()&&!/^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$/.test(e.classname.trim())&&(n.classname=`${r}: classname ${Q(e.classname)} is not a module.attr name`);let o=Number(e.parallelism);(!/^\d+$/.test(String(e.parallelism).trim())||o<1||o>256)&&(n.parallelism=`${r}: parallelism must be a whole number from 1 to 256; got ${Q(e.parallelism)}`);let s=String(e.maxMessageRetries).trim();s&&(!/^\d+$/.test(s)||Number(s)>100)&&(n.maxMessageRetries=`${r}: max_message_retries must be a whole number from 0 to 100, or empty; got ${Q(e.maxMessageRetries)}`);for(let[t,i]of[[`userConfig`,`user_config`],[`extra`,`more config`]])if(e[t].trim())try{let n=JSON.parse(e[t]);if(!n||typeof n!=`object`||Array.isArray(n))throw Error(`not an object`)}catch(e){n[t]=`${r}: ${i} must be a JSON object: ${e.message}`}return n}function bt(e){let t={inputs:vt(e.inputs),processing_guarantees:e.guarantees,parallelism:Number(e.parallelism)};String(e.maxMessageRetries).trim()&&(t.max_message_retries=Number(e.maxMessageRetries));let n={classname:e.classname,topics_pattern:e.topicsPattern,output:e.output,log_topic:e.logTopic,dead_letter_topic:e.deadLetterTopic,subscription_name:e.subscriptionName};for(let[e,r]of Object.entries(n))r.trim()&&(t[e]=r.trim());return t.inputs.length||delete t.inputs,e.userConfig.trim()&&(t.user_config=JSON.parse(e.userConfig)),e.extra.trim()&&Object.assign(t,JSON.parse(e.extra)),t}var xt={tenant:`public`,namespace:`default`,name:``,file:null,url:``,classname:``,inputs:``,topicsPattern:``,output:``,guarantees:`at_least_once`,parallelism:`1`,maxMessageRetries:``,subscriptionName:``,logTopic:``,deadLetterTopic:``,userConfig:``,extra:``,mode:`drain`};function St(e,t){let[n,r,i]=e.split(`/`),a=e=>e==null?``:String(e),o=G(t,`user_config`);return{...xt,tenant:n,namespace:r,name:i,classname:a(G(t,`classname`)??G(t,`class_name`)),inputs:(G(t,`inputs`)||[]).join(`, `),topicsPattern:a(G(t,`topics_pattern`)),output:a(G(t,`output`)),guarantees:String(G(t,`processing_guarantees`)||`at_least_once`).toLowerCase().replace(`atleast`,`at_least`).replace(`atmost`,`at_most`),parallelism:a(G(t,`parallelism`)??1),maxMessageRetries:a(G(t,`max_message_retries`)),subscriptionName:a(G(t,`subscription_name`)),logTopic:a(G(t,`log_topic`)),deadLetterTopic:a(G(t,`dead_letter_topic`)),userConfig:o&&Object.keys(o).length?JSON.stringify(o):``}}function $({id:e,label:t,hint:n,problem:r,children:i}){return K`<div class="field ${r?`invalid`:``}">
    <label for=${e}>${t}</label>
    ${i}
    ${n&&!r&&K`<small id=${`${e}-hint`} class="muted">${n}</small>`}
    ${r&&K`<small id=${`${e}-problem`} class="problem" role="alert">${r}</small>`}
  </div>`}function Ct({fqfn:e}){let t=!e,[n,r]=z(xt),[i,a]=z({}),[o,s]=z(null),[c,l]=z([]),[u,d]=z(!1);B(()=>{if(!e)return r(xt);U(W(e)).then(t=>r(St(e,t.config&&typeof t.config==`object`?t.config:t)),s)},[e]);let f=e=>t=>r({...n,[e]:t.target.type===`file`?t.target.files[0]||null:t.target.value}),p=(e,t,r={})=>K`<input id=${e} name=${t} value=${n[t]} onInput=${f(t)}
    aria-invalid=${i[t]?`true`:void 0}
    aria-describedby=${i[t]?`${e}-problem`:`${e}-hint`} ...${r} />`;return K`<section aria-labelledby="submit-title">
    <nav class="crumbs" aria-label="Breadcrumb"><a href="#/functions">Functions</a>${e&&K` / <a href=${`#/functions/${e}`}>${e}</a>`}</nav>
    <h1 id="submit-title">${t?`New function`:`Update ${e}`}</h1>
    <form class="card form" onSubmit=${async e=>{e.preventDefault(),s(null),l([]);let r=yt(n,t);if(a(r),Object.keys(r).length){document.getElementById(`f-${Object.keys(r)[0]}`)?.focus();return}let i=new FormData;i.set(`functionConfig`,JSON.stringify(bt(n))),n.file?i.set(`data`,n.file,n.file.name):n.url.trim()&&i.set(`url`,n.url.trim()),t||i.set(`mode`,n.mode),d(!0);try{let e=`${n.tenant}/${n.namespace}/${n.name}`,r=await H(t?`POST`:`PUT`,W(e),i);r&&r.warnings&&r.warnings.length?l(r.warnings):location.hash=`#/functions/${e}`}catch(e){s(e)}finally{d(!1)}}} noValidate>
      <fieldset><legend>Name</legend><div class="row">
        <${$} id="f-tenant" label="Tenant" problem=${i.tenant}>${p(`f-tenant`,`tenant`,{readOnly:!t})}<//>
        <${$} id="f-namespace" label="Namespace" problem=${i.namespace}>${p(`f-namespace`,`namespace`,{readOnly:!t})}<//>
        <${$} id="f-name" label="Name" problem=${i.name}>${p(`f-name`,`name`,{readOnly:!t,required:!0})}<//>
      </div></fieldset>
      <fieldset><legend>Code</legend><div class="row">
        <${$} id="f-file" label="Package (.py, .zip, .whl)" problem=${i.file}
          hint=${t?`uploaded with the request`:`none: keep the current version's code`}>
          <input id="f-file" type="file" accept=".py,.zip,.whl" onChange=${f(`file`)}
            aria-invalid=${i.file?`true`:void 0} aria-describedby=${i.file?`f-file-problem`:`f-file-hint`} /><//>
        <${$} id="f-url" label="…or an uploaded package" hint="its upload path or sha256: digest">${p(`f-url`,`url`)}<//>
        <${$} id="f-classname" label="Class name" problem=${i.classname} hint="module.attr; optional for a .py with one function">${p(`f-classname`,`classname`)}<//>
      </div></fieldset>
      <fieldset><legend>Topics</legend><div class="row">
        <${$} id="f-inputs" label="Inputs" problem=${i.inputs} hint="comma separated">${p(`f-inputs`,`inputs`)}<//>
        <${$} id="f-topicsPattern" label="…or topics pattern" problem=${i.topicsPattern} hint="a regex of tenant/namespace/topic">${p(`f-topicsPattern`,`topicsPattern`)}<//>
        <${$} id="f-output" label="Output" problem=${i.output} hint="optional">${p(`f-output`,`output`)}<//>
      </div></fieldset>
      <fieldset><legend>Running</legend><div class="row">
        <${$} id="f-guarantees" label="Processing guarantees">
          <select id="f-guarantees" value=${n.guarantees} onChange=${f(`guarantees`)}>
            <option value="at_least_once">at least once</option>
            <option value="at_most_once">at most once</option>
            <option value="effectively_once">effectively once</option>
          </select><//>
        <${$} id="f-parallelism" label="Parallelism" problem=${i.parallelism} hint="instances, 1 to 256">${p(`f-parallelism`,`parallelism`,{inputMode:`numeric`})}<//>
        <${$} id="f-maxMessageRetries" label="Max message retries" problem=${i.maxMessageRetries} hint="0 to 100; empty: delivered again without end, as in Pulsar">${p(`f-maxMessageRetries`,`maxMessageRetries`,{inputMode:`numeric`})}<//>
      </div></fieldset>
      <details><summary>More</summary><div class="row">
        <${$} id="f-subscriptionName" label="Subscription name" hint="default: the function's FQFN">${p(`f-subscriptionName`,`subscriptionName`)}<//>
        <${$} id="f-logTopic" label="Log topic" problem=${i.logTopic}>${p(`f-logTopic`,`logTopic`)}<//>
        <${$} id="f-deadLetterTopic" label="Dead-letter topic" problem=${i.deadLetterTopic}>${p(`f-deadLetterTopic`,`deadLetterTopic`)}<//>
        <${$} id="f-userConfig" label="User config (JSON)" problem=${i.userConfig}>${p(`f-userConfig`,`userConfig`)}<//>
        <${$} id="f-extra" label="More config (JSON, Pulsar's or sparkfn's keys)" problem=${i.extra}>${p(`f-extra`,`extra`)}<//>
      </div></details>
      ${!t&&K`<${$} id="f-mode" label="The running version ends by">
        <select id="f-mode" value=${n.mode} onChange=${f(`mode`)}><option value="drain">drain</option><option value="suspend">suspend</option></select><//>`}
      <${J} error=${o} />
      ${c.length>0&&K`<div class="warnings" role="status"><p>Saved, with warnings:</p>
        <ul>${c.map(e=>K`<li>${e}</li>`)}</ul>
        <a href=${`#/functions/${n.tenant}/${n.namespace}/${n.name}`}>Open the function</a></div>`}
      <div class="actions"><button type="submit" class="primary" disabled=${u}>${u?`Submitting…`:t?`Create`:`Update`}</button>
        <a class="button ghost" href=${e?`#/functions/${e}`:`#/functions`}>Cancel</a></div>
    </form>
  </section>`}async function wt(){let e=await U(`/admin/v2/tenants`),t=[];for(let n of e)for(let e of await U(`/admin/v2/namespaces/${encodeURIComponent(n)}`)){let[n,r]=e.split(`/`),i=await U(`/admin/v2/persistent/${encodeURIComponent(n)}/${encodeURIComponent(r)}`);for(let e of i)t.push(e.replace(/^persistent:\/\//,``))}return t}var Tt=100;function Et({topic:e}){let[t,n,r]=e.split(`/`),[i]=q(()=>U(`${ze(t,n,r)}/partitioned-stats`),[e]),a=i?Object.entries(i.subscriptions):[],o=a.reduce((e,[,t])=>e+(t.msgBacklog||0),0);return K`<tr data-topic=${e}>
    <td><a href=${`#/topics/${e}`}>${r}</a></td>
    <td>${i?i.schemaType:``}</td>
    <td>${i?i.metadata.partitions:``}</td>
    <td>${i?X(i.msgInCounter):``}</td>
    <td>${i?X(i.messages):``}</td>
    <td>${i?a.length:``}</td>
    <td>${i?X(o):``}</td>
  </tr>`}function Dt(){let[e,t]=q(wt,[],1e4),[n,r]=z(``),i=(e||[]).filter(e=>e.toLowerCase().includes(n.toLowerCase())),a=i.slice(0,Tt),o=null;return K`<section aria-labelledby="topics-title">
    <div class="page-head"><h1 id="topics-title">Topics</h1></div>
    <div class="toolbar"><label class="search"><span class="sr-only">Search topics</span>
      <input type="search" data-search placeholder="Search topics  ( / )" value=${n}
        onInput=${e=>r(e.target.value)} /></label></div>
    <${J} error=${t} />
    ${e&&i.length===0&&K`<p class="muted">No topic.</p>`}
    ${i.length>Tt&&K`<p class="muted">The first ${Tt} of ${i.length}: search to narrow them.</p>`}
    ${a.length>0&&K`<table class="list"><thead><tr><th scope="col">Topic</th><th scope="col">Schema</th>
      <th scope="col">Partitions</th><th scope="col">Appended</th><th scope="col">Retained</th>
      <th scope="col">Subscriptions</th><th scope="col">Lag</th></tr></thead><tbody>
      ${a.map(e=>{let[t,n]=e.split(`/`),r=`${t}/${n}`!==o;return o=`${t}/${n}`,K`${r&&K`<tr class="group"><th colspan="7" scope="rowgroup">${o}</th></tr>`}
          <${Et} key=${e} topic=${e} />`})}</tbody></table>`}
  </section>`}function Ot({message:e,schemaType:t}){let[n,r]=z(`auto`),i,a,o=e.value;if(n===`hex`||n===`auto`&&o===null&&e.valueBase64)a=`binary`,i=e.valueBase64?et(e.valueBase64):``;else if(typeof o==`object`&&o)a=`json`,i=JSON.stringify(o,null,2);else{let e=o===null?``:String(o);try{let t=JSON.parse(e);typeof t==`object`&&t&&(a=`json`,i=JSON.stringify(t,null,2))}catch{}a||(a=`text`,i=e)}return K`<div class="payload" data-kind=${a}>
    <div class="payload-head"><span class="badge tone-off">${a}</span>
      <button class="link small" onClick=${()=>r(n===`hex`?`auto`:`hex`)}>${n===`hex`?`decoded`:`hex`}</button></div>
    <pre>${i}</pre></div>`}async function kt(e,t,n){let r=[];for(let i=0;i<t;i++)for(let t=1;t<=n;t++)try{let n=new URLSearchParams({initialPosition:`latest`,messagePosition:t,partition:i});r.push(await U(`${e}/examinemessage?${n}`))}catch(e){if(e.status===404)break;throw e}return r.sort((e,t)=>String(t.publishTime).localeCompare(String(e.publishTime)))}function At({parts:e}){let[t,n,r]=e,i=ze(t,n,r),[a,o]=q(()=>U(`${i}/partitioned-stats`),[i],3e3),[s,c]=z(5),[l,u]=z(null),[d,f]=z(null),p=async()=>{f(null);try{u(await kt(i,a?a.metadata.partitions:1,s))}catch(e){f(e)}},m=a?Object.entries(a.partitions||{}):[];return K`<section aria-labelledby="topic-title">
    <nav class="crumbs" aria-label="Breadcrumb"><a href="#/topics">Topics</a> / ${t}/${n}</nav>
    <div class="page-head"><h1 id="topic-title">${r}</h1>
      ${a&&K`<span class="badge tone-off">${a.schemaType}</span>
        <span class="muted">${a.metadata.partitions} partition${a.metadata.partitions===1?``:`s`} · ${X(a.messages)} retained · ${X(a.storageSize)} bytes</span>`}</div>
    <${J} error=${o} />
    ${a&&K`<div class="two">
      <section class="card" aria-labelledby="parts-title"><h2 id="parts-title">Partitions</h2>
        <table class="list compact" data-testid="partitions"><thead><tr><th scope="col">Partition</th><th scope="col">End offset</th><th scope="col">Retained</th><th scope="col">Bytes</th></tr></thead>
        <tbody>${m.map(([e,t],n)=>K`<tr><td>${n}</td><td>${X(t.msgInCounter)}</td><td>${X(t.messages)}</td><td>${X(t.storageSize)}</td></tr>`)}</tbody></table>
      </section>
      <section class="card" aria-labelledby="subs-title"><h2 id="subs-title">Subscriptions</h2>
        ${Object.keys(a.subscriptions).length===0&&K`<p class="muted">None.</p>`}
        ${Object.keys(a.subscriptions).length>0&&K`<table class="list compact" data-testid="subscriptions"><thead><tr><th scope="col">Subscription</th><th scope="col">Lag (backlog)</th></tr></thead>
        <tbody>${Object.entries(a.subscriptions).map(([e,t])=>K`<tr><td>${e}</td><td>${X(t.msgBacklog)}</td></tr>`)}</tbody></table>`}
      </section></div>`}
    <section class="card" aria-labelledby="peek-title">
      <div class="card-head"><h2 id="peek-title">Latest messages</h2>
        <label>Per partition <input type="number" min="1" max="50" value=${s} class="narrow"
          onInput=${e=>c(Math.max(1,Math.min(50,Number(e.target.value)||1)))} /></label>
        <button class="primary" onClick=${p} disabled=${!a}>Peek</button></div>
      <${J} error=${d} />
      ${l&&l.length===0&&K`<p class="muted">The topic holds no message.</p>`}
      ${l&&l.map(e=>K`<article class="message" data-testid="message" key=${e.messageId}>
        <header><code>${e.messageId}</code>${e.key&&K` · key <code>${e.key}</code>`} · ${Y(e.publishTime)}
          ${e.properties&&Object.keys(e.properties).length>0&&K`<span class="muted"> · ${Object.entries(e.properties).map(([e,t])=>`${e}=${t}`).join(`, `)}</span>`}</header>
        <${Ot} message=${e} schemaType=${a&&a.schemaType} /></article>`)}
    </section>
  </section>`}async function jt(){try{return await U(`/ready`)}catch(e){if(e.status===401)throw e;return{status:`not ready`,reason:e.reason,message:e.message}}}async function Mt(){let[e,t,n]=await Promise.all([U(`/admin/v2/worker/cluster`),U(`/admin/v2/worker/cluster/leader`).catch(e=>{if(e.status===401)throw e;return null}),U(`/admin/v2/worker/assignments`).catch(e=>{if(e.status===401)throw e;return null})]);return{workers:e,leader:t,assignments:n}}function Nt({self:e}){let[t,n]=q(Mt,[],3e3);if(n)return K`<section class="card"><h2>Cluster</h2><${J} error=${n} /></section>`;if(!t)return null;let{workers:r,leader:i,assignments:a}=t,o=e=>a&&a[e]||[];return K`<section class="card" aria-labelledby="cluster-title"><h2 id="cluster-title">Cluster</h2>
    <p class="muted">${r.length} live worker${r.length===1?``:`s`}; leader:
      ${i?K` <code>${i.workerId}</code>`:` none this moment (one takes over within seconds)`}</p>
    <table class="list" data-testid="cluster"><thead><tr><th>Worker</th><th>Address</th><th>Role</th>
      ${a&&K`<th>Instances</th>`}</tr></thead>
      <tbody>${r.map(t=>K`<tr data-worker=${t.workerId}>
        <td><code>${t.workerId}</code>${t.workerId===e?K` <span class="muted">(this one)</span>`:``}</td>
        <td>${t.workerHostname}:${t.port}</td>
        <td>${i&&i.workerId===t.workerId?K`<span class="badge tone-ok">leader</span>`:`member`}</td>
        ${a&&K`<td title=${o(t.workerId).join(`
`)}>${o(t.workerId).length}</td>`}
      </tr>`)}</tbody></table></section>`}function Pt(){let[e,t]=q(()=>U(`/admin/v3/worker`),[],2e3),[n]=q(jt,[],5e3),r=e?Object.entries(e.functionsByState).sort():[],i=r.reduce((e,[,t])=>e+t,0);return K`<section aria-labelledby="worker-title">
    <div class="page-head"><h1 id="worker-title">Worker ${e&&K`<code>${e.workerId}</code>`}</h1>
      ${n&&K`<span class=${`badge ${n.status===`ready`?`tone-ok`:`tone-warn`}`}>${n.status}</span>`}</div>
    <${J} error=${t} />
    ${n&&n.message&&K`<p class="muted">${n.reason}: ${n.message}</p>`}
    ${e&&K`<div class="two">
      <section class="card" aria-labelledby="about-title"><h2 id="about-title">About</h2>
        <dl class="facts" data-testid="worker-facts">
          <dt>sparkfn</dt><dd>${e.version}</dd>
          <dt>Spark</dt><dd>${e.sparkVersion||`not started yet`}</dd>
          <dt>Spark master</dt><dd><code>${e.sparkMaster}</code></dd>
          <dt>Spark UI</dt><dd>${e.sparkUiUrl?K`<a href=${e.sparkUiUrl} target="_blank" rel="noopener">${e.sparkUiUrl}</a>`:K`<span class="muted">off (spark.ui.enabled is false, or Spark has not started)</span>`}</dd>
          <dt>Up</dt><dd data-testid="uptime">${Ke(e.uptimeSeconds)} <span class="muted">since ${Y(e.startedAt)}</span></dd>
          <dt>Store</dt><dd>${e.store}</dd>
          <dt>Auth</dt><dd>${e.authEnabled?`on (bearer tokens)`:`off`}</dd>
        </dl></section>
      <section class="card" aria-labelledby="states-title"><h2 id="states-title">Functions per state</h2>
        ${i===0&&K`<p class="muted">No function registered.</p>`}
        <ul class="bars" data-testid="states">${r.map(([e,t])=>K`<li>
          <a href=${`#/functions?state=${e}`}><${Ge} state=${e} /></a>
          <span class="bar"><span style=${`width:${100*t/Math.max(1,i)}%`} class="tone-${e}"></span></span>
          <strong>${t}</strong></li>`)}</ul>
      </section></div>`}
    ${e&&K`<${Nt} self=${e.workerId} />`}
  </section>`}function Ft(){let[e,t]=z(location.hash||`#/functions`);return B(()=>{let e=()=>t(location.hash||`#/functions`);return addEventListener(`hashchange`,e),()=>removeEventListener(`hashchange`,e)},[]),e}var It=[[`#/functions`,`Functions`,`f`],[`#/new`,`New function`,`n`],[`#/topics`,`Topics`,`t`],[`#/worker`,`Worker`,`w`]];function Lt(e){let[t,...n]=e.replace(/^#\/?/,``).split(`/`).map(decodeURIComponent),r=n.join(`/`);return t===`functions`&&n.length===3?K`<${ft} key=${r} fqfn=${r} />`:t===`update`&&n.length===3?K`<${Ct} key=${r} fqfn=${r} />`:t===`new`?K`<${Ct} key="new" />`:t===`topics`&&n.length===3?K`<${At} key=${r} parts=${n} />`:t===`topics`?K`<${Dt} />`:t===`worker`?K`<${Pt} />`:K`<${$e} />`}function Rt(e){let t=e.target;return t&&(t.isContentEditable||[`INPUT`,`TEXTAREA`,`SELECT`].includes(t.tagName))}function zt(){return B(()=>{let e=e=>{if(e.ctrlKey||e.metaKey||e.altKey||Rt(e))return;if(e.key===`/`){let t=document.querySelector(`[data-search]`);t&&(e.preventDefault(),t.focus());return}if(e.key===`?`){document.getElementById(`shortcuts`)?.toggleAttribute(`open`);return}let t=It.find(([,,t])=>t===e.key);t&&(location.hash=t[0])};return addEventListener(`keydown`,e),()=>removeEventListener(`keydown`,e)},[]),K`<details id="shortcuts" class="shortcuts">
    <summary>Keyboard</summary>
    <dl>
      <dt><kbd>/</kbd></dt><dd>search</dd>
      ${It.map(([,e,t])=>K`<dt><kbd>${t}</kbd></dt><dd>${e}</dd>`)}
      <dt><kbd>Tab</kbd></dt><dd>next control</dd>
      <dt><kbd>?</kbd></dt><dd>this list</dd>
    </dl>
  </details>`}function Bt(){let e=je(Pe),[t,n]=z(``),[r,i]=z(!1),a=xe(null);return B(()=>a.current?.focus(),[]),K`<div class="token-screen">
    <form class="card token-card" onSubmit=${async e=>{e.preventDefault(),i(!0),Le(t.trim());try{await H(`GET`,`/ready`,void 0,{raw:!0}).catch(e=>{if(e.status===401)throw e}),Pe.set(``),Ne.set(!1)}catch{Le(``)}finally{i(!1)}}} aria-labelledby="token-title">
      <h1 id="token-title">This worker asks for a token</h1>
      <p class="muted">
        Auth is on: paste a token from <code>sparkfn tokens create</code>. It is kept in this tab only.
      </p>
      <label for="token">Token</label>
      <textarea id="token" ref=${a} rows="4" value=${t} required spellcheck=${!1} autocomplete="off"
        onInput=${e=>n(e.target.value)}></textarea>
      ${e&&K`<p class="error" role="alert" data-testid="token-error">${e}</p>`}
      <button type="submit" class="primary" disabled=${r}>Sign in</button>
    </form>
  </div>`}function Vt(){let e=Ft();if(je(Ne))return K`<${Bt} />`;let t=e.split(`/`)[1]||`functions`,n=e=>e.split(`/`)[1]===t||t===`update`&&e===`#/new`;return K`<div class="shell">
    <a class="skip" href="#main" onClick=${e=>{e.preventDefault(),document.getElementById(`main`).focus()}}>Skip to content</a>
    <header class="top">
      <a class="brand" href="#/functions"><span class="logo" aria-hidden="true">ϟ</span> sparkfn</a>
      <nav aria-label="Sections">
        ${It.map(([e,t,r])=>K`<a href=${e} aria-current=${n(e)?`page`:void 0}
            aria-keyshortcuts=${r}>${t}</a>`)}
      </nav>
      <div class="spacer"></div>
      <${zt} />
      ${Ie()&&K`<button class="ghost" onClick=${()=>{Le(``),Pe.set(``),Ne.set(!0)}}
        title="Forget the token">Sign out</button>`}
    </header>
    <main id="main" tabindex="-1">${Lt(e)}</main>
  </div>`}F(K`<${Vt} />`,document.getElementById(`app`));